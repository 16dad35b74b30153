"""``zaqar-delay-consumers``: list, show and remove a queue's persistent
consumers, run as an operator would against a zaqar.conf (on Redis)."""

import json
import subprocess
import sys
import uuid

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import post
from localstack.factories import redis as redis_factory
from tests.redis.test_commands import config  # noqa: F401 (a fixture)

pytestmark = pytest.mark.integration


def command(config, *args):
    # The module the zaqar-delay-consumers console script runs.
    return subprocess.run(
        [sys.executable, '-m', 'zaqar_delay.cmd.consumers',
         '--config-file', config, *args],
        timeout=60, capture_output=True, text=True)


def shown(result):
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_list_show_and_remove_consumers(request, conf, config, project):
    driver = redis_factory.make_driver(request, conf)
    driver.queue_controller.create('feed', project=project)
    subs = driver.subscription_controller
    reader, idle = sorted(str(uuid.uuid4()) for _ in range(2))
    sid = subs.create('feed', 'cursor:' + reader, 3600, {}, project=project)
    subs.create('feed', 'cursor:' + idle, 3600, {}, project=project)
    post(driver, 'feed', project, 'a', 'b', 'c')
    pages = driver.message_controller.list('feed', project=project, limit=1,
                                           client_uuid=uuid.UUID(reader))
    next(pages)
    marker = next(pages)
    next(driver.message_controller.list('feed', project=project,
                                        marker=marker, limit=1,
                                        client_uuid=uuid.UUID(reader)))

    listed = shown(command(config, 'list', project, 'feed'))
    assert [(c['consume_id'], c['cursor'], c['lag'], c['lost'], c['idle'])
            for c in listed] == [(reader, marker, 2, 0, False),
                                 (idle, None, 3, 0, False)]
    assert all(c['last_active_age'] >= 0 for c in listed)
    one, = shown(command(config, 'show', project, 'feed', reader))
    assert (one['consume_id'], one['cursor'], one['lag'], one['lost'],
            one['idle']) == (reader, marker, 2, 0, False)

    unknown = str(uuid.uuid4())
    missing = command(config, 'show', project, 'feed', unknown)
    assert missing.returncode == 1 and unknown in missing.stderr
    assert command(config, 'remove', project, 'feed',
                   unknown).returncode == 1

    removed = command(config, 'remove', project, 'feed', reader)
    assert removed.returncode == 0 and reader in removed.stdout
    with pytest.raises(storage_errors.SubscriptionDoesNotExist):
        subs.get('feed', sid, project=project)
    assert [c['consume_id'] for c in shown(
        command(config, 'list', project, 'feed'))] == [idle]
    assert shown(command(config, 'list', project, 'other')) == []
