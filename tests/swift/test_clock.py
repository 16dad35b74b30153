"""Swift has no clock to read: the API node's clock decides due times
(README's capability table, SPEC §7; docs/swift.md). The Redis and
MongoDB drivers hand out nothing early for a skewed API node
(check_an_api_clock_ahead_hands_out_nothing_early); on Swift, an API
node whose clock runs ahead hands a delayed message out early."""

import time

from tests.contract.helpers import claim, post


def test_an_api_node_clock_ahead_hands_a_delayed_message_out_early(
        driver, project, monkeypatch):
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 30}, project=project)
    post(driver, 'q', project, 'in 30 s', ttl=600)
    post(driver, 'q', project, 'now', delay=0, ttl=600)
    real_time = time.time
    monkeypatch.setattr(time, 'time', lambda: real_time() + 40)
    assert [m['body'] for m in claim(driver, 'q', project)[1]] == [
        'in 30 s', 'now']
