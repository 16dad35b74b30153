"""zaqar-delay-migrate's progress lines (docs/migration.md, step 4): a
move reads each message twice, and its rate counts messages, not reads."""

import io

from zaqar_delay.migrate import progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_move_counts_each_message_once_in_its_rate():
    out, clock = io.StringIO(), Clock()
    report = progress.Progress(100, out, passes=2, clock=clock)
    clock.now += 10
    report.add(100, 'moved')
    clock.now += 10
    report.add(100, 'verified')
    assert out.getvalue().splitlines() == [
        'moved: 100 / 200 messages (read 2 times each), 5 messages/s, '
        '10 s left',
        'verified: 200 / 200 messages (read 2 times each), 5 messages/s, '
        '0 s left']
    assert report.rate() == 5


def test_a_dry_run_reads_each_message_once():
    out, clock = io.StringIO(), Clock()
    report = progress.Progress(40, out, clock=clock)
    clock.now += 2
    report.add(10, 'counted')
    assert out.getvalue() == ('counted: 10 / 40 messages, 5 messages/s, '
                              '6 s left\n')
