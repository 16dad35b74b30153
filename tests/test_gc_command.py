"""``zaqar-delay-gc`` survives store outages: it reports each failed pass
and tries again with backoff instead of exiting."""

import pytest

from zaqar_delay import errors
from zaqar_delay.cmd import gc as gc_command


class Stop(Exception):
    pass


class FlakyStore:
    """gc() fails ``failures`` times, then succeeds."""

    def __init__(self, failures):
        self.failures = failures
        self.passes = 0

    def gc(self):
        self.passes += 1
        if self.passes <= self.failures:
            raise errors.BackendUnavailable(backend='Redis',
                                            reason='connection refused')
        return 7


@pytest.fixture
def run(monkeypatch):
    def run(store, *argv, stop_after=None):
        class Bootstrap:
            def __init__(self, conf):
                self.storage = type('Pipeline', (), {'_storage': store})()

        sleeps = []

        def sleep(seconds):
            sleeps.append(seconds)
            if stop_after is not None and len(sleeps) >= stop_after:
                raise Stop()

        monkeypatch.setattr(gc_command.bootstrap, 'Bootstrap', Bootstrap)
        monkeypatch.setattr(gc_command.time, 'sleep', sleep)
        # Keep pytest's log capture: oslo.log would replace its handler.
        monkeypatch.setattr(gc_command.logging, 'setup', lambda *a: None)
        try:
            code = gc_command.main(['--config-file', '/dev/null', *argv])
        except Stop:
            code = None
        return code, sleeps
    return run


def test_the_daemon_backs_off_through_an_outage(run, caplog):
    store = FlakyStore(failures=4)
    code, sleeps = run(store, '--interval', '30', '--max_backoff', '5',
                       stop_after=6)
    assert code is None
    assert sleeps == [1, 2, 4, 5, 30, 30]
    assert store.passes == 6
    failed = [r.getMessage() for r in caplog.records
              if 'gc pass failed' in r.getMessage()]
    assert len(failed) == 4 and 'connection refused' in failed[0]
    assert any('after 4 failed passes' in r.getMessage()
               for r in caplog.records)


def test_once_reports_a_failed_pass_with_its_exit_status(run):
    assert run(FlakyStore(failures=1), '--once') == (1, [])
    assert run(FlakyStore(failures=0), '--once') == (0, [])
