"""Persistent consumers' cost on every backend, figures and ratios side by
side (issue 11).

    python -m benchmarks.consumers [--quick] [redis|mongodb|swift ...]

Runs ``benchmarks/consumers_<backend>.py`` (one module per backend, each
runnable on its own and printing its figures, its ratios on lines with
the word "ratio") for every backend named, or all of them, then repeats
the ratio lines under one heading: post throughput with 100 persistent
consumers against none (within 1.2x), resuming a consumer with 100,000
messages behind its cursor against resuming at the head (within 1.2x;
Swift runs a smaller queue and says so), and read-by-all cleanup time per
removed message for two sizes (O(messages removed)). A backend whose
module does not exist yet is reported as such.
"""

import sys
import time
import uuid

from benchmarks import retention
from zaqar_delay import consumers


def main(argv=None):
    return retention.main(argv, family='consumers')


def subscribe(driver, name, count):
    """Register ``count`` persistent consumers of queue ``name``; their
    consume ids."""
    ids = [str(uuid.uuid4()) for _ in range(count)]
    for consume_id in ids:
        driver.subscription_controller.create(
            name, consumers.PREFIX + consume_id, 3600, {},
            project=retention.PROJECT)
    return ids


def resume_page(driver, name, consume_id):
    """List one page of 10 as persistent consumer ``consume_id`` (resuming
    after its cursor); the seconds it took."""
    started = time.perf_counter()
    pages = driver.message_controller.list(
        name, project=retention.PROJECT, limit=10,
        client_uuid=uuid.UUID(consume_id))
    assert len(list(next(pages))) == 10
    return time.perf_counter() - started


if __name__ == '__main__':
    sys.exit(main())
