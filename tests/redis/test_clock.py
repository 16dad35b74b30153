"""SPEC §7 on Redis: due times come from the Redis server's clock
(``TIME`` inside each script), so an API node whose own clock runs ahead
cannot hand out a delayed message early."""

import time

from tests.contract.helpers import claim, listed, post

HOUR_S = 3600


def test_an_api_node_clock_an_hour_ahead_hands_out_nothing_early(
        driver, project, monkeypatch):
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 30}, project=project)
    post(driver, 'q', project, 'in 30 s')
    post(driver, 'q', project, 'now', delay=0)
    # This process's wall clock jumps an hour ahead (as on a node with a
    # skewed clock); Redis's does not.
    real_time = time.time
    monkeypatch.setattr(time, 'time', lambda: real_time() + HOUR_S)
    assert [m['body'] for m in claim(driver, 'q', project)[1]] == ['now']
    assert claim(driver, 'q', project) == (None, [])
    assert [m['body'] for m in listed(driver, 'q', project,
                                      include_delayed=True)] == ['in 30 s']
