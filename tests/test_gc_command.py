"""``zaqar-delay-gc``: it survives store outages (it reports each failed
pass and tries again with backoff instead of exiting), paces its passes and
batches with the [retention] options or their flags, reports each pass, and
two of them on one store remove every message once."""

import os
import re
import subprocess
import sys
import time

import pytest

from localstack import backends
from tests.contract.helpers import bodies, listed, post
from localstack import zaqar_server
from zaqar_delay import driver as zd_driver
from zaqar_delay import errors
from zaqar_delay.cmd import gc as gc_command


class Stop(Exception):
    pass


class FlakyStore:
    """gc() fails ``failures`` times, then succeeds, each pass taking
    ``seconds`` on the daemon's clock."""

    def __init__(self, failures, seconds=0, result=None):
        self.failures = failures
        self.seconds = seconds
        self.result = result or zd_driver.GcPass(queues=3, expired=7)
        self.passes = 0
        self.clock = None
        self.conf = None

    def gc(self):
        self.passes += 1
        self.clock.now += self.seconds
        if self.passes <= self.failures:
            raise errors.BackendUnavailable(backend='Redis',
                                            reason='connection refused')
        return self.result


class Clock:
    """time.monotonic of the daemon: moves only by sleeps and passes."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def run(monkeypatch):
    def run(store, *argv, stop_after=None, config='/dev/null'):
        class Bootstrap:
            def __init__(self, conf):
                store.conf = conf
                self.storage = type('Pipeline', (), {'_storage': store})()

        sleeps = []
        store.clock = clock = Clock()

        def sleep(seconds):
            sleeps.append(seconds)
            clock.now += seconds
            if stop_after is not None and len(sleeps) >= stop_after:
                raise Stop()

        monkeypatch.setattr(gc_command.bootstrap, 'Bootstrap', Bootstrap)
        monkeypatch.setattr(gc_command.time, 'sleep', sleep)
        monkeypatch.setattr(gc_command.time, 'monotonic', clock)
        # Keep pytest's log capture: oslo.log would replace its handler.
        monkeypatch.setattr(gc_command.logging, 'setup', lambda *a: None)
        try:
            code = gc_command.main(['--config-file', config, *argv])
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


def test_the_backoff_doubles_up_to_300_s_by_default(run):
    # docs/reliability.md: a failed pass is tried again after 1, 2, 4 ...
    # seconds, at most --max_backoff, 300 by default.
    code, sleeps = run(FlakyStore(failures=11), '--interval', '30',
                       stop_after=12)
    assert code is None
    assert sleeps == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 30]


def test_once_reports_a_failed_pass_with_its_exit_status(run):
    assert run(FlakyStore(failures=1), '--once') == (1, [])
    assert run(FlakyStore(failures=0), '--once') == (0, [])


def test_passes_are_paced_to_full_scan_time(run):
    # Each pass takes 10 s: the daemon waits out the rest of 25 s.
    store = FlakyStore(failures=0, seconds=10)
    code, sleeps = run(store, '--full_scan_time', '25', stop_after=3)
    assert sleeps == [15, 15, 15]
    # A pass slower than the pace is followed by the next one at once.
    store = FlakyStore(failures=0, seconds=40)
    assert run(store, '--full_scan_time', '25', stop_after=2)[1] == [0, 0]


def test_interval_is_a_deprecated_name_of_full_scan_time(run):
    store = FlakyStore(failures=0, seconds=1)
    assert run(store, '--interval', '30', stop_after=2)[1] == [29, 29]
    assert store.conf.retention.full_scan_time == 30


def test_pacing_comes_from_retention_options_unless_a_flag_is_given(
        run, tmp_path):
    config = tmp_path / 'zaqar.conf'
    config.write_text('[retention]\ntuples_per_iteration = 40\n'
                      'iteration_delay = 0.5\nfull_scan_time = 12\n')
    store = FlakyStore(failures=0, seconds=2)
    assert run(store, config=str(config), stop_after=1)[1] == [10]
    assert (store.conf.retention.tuples_per_iteration,
            store.conf.retention.iteration_delay) == (40, 0.5)
    store = FlakyStore(failures=0)
    run(store, '--tuples_per_iteration', '7', '--iteration_delay', '0',
        '--full_scan_time', '3', '--once', config=str(config))
    retention = store.conf.retention
    # The data driver reads these: the flags override the file.
    assert (retention.tuples_per_iteration, retention.iteration_delay,
            retention.full_scan_time) == (7, 0, 3)


@pytest.mark.parametrize('flag, value', [
    ('--tuples_per_iteration', '0'), ('--iteration_delay', '-1'),
    ('--full_scan_time', '0')])
def test_pacing_flags_out_of_range_are_refused(run, flag, value):
    store = FlakyStore(failures=0)
    with pytest.raises(SystemExit):
        run(store, flag, value, '--once')
    assert store.passes == 0


def test_verbose_prints_each_pass_with_counts_and_rate(run, capsys):
    result = zd_driver.GcPass(queues=12, skipped=1, expired=30,
                              retention=170)
    store = FlakyStore(failures=0, seconds=4, result=result)
    assert run(store, '--once', '--verbose') == (0, [])
    line = capsys.readouterr().out.strip()
    assert line == ('gc pass 1: 12 queues (1 skipped), 30 expired removed, '
                    '170 removed by retention, 4.00 s, 50.0 messages/s')
    run(FlakyStore(failures=0), '--once')
    assert capsys.readouterr().out == ''


def redis_store(redis_url, directory, kept, request):
    """(zaqar.conf path, Redis data driver) of a store on ``redis_url``
    whose retention keeps ``kept`` messages per queue."""
    from zaqar_delay.drivers.redis import driver as redis_driver
    config = zaqar_server.write_config(
        str(directory), redis_url, 0, 'delay.redis',
        {'uri': redis_url.replace('redis://', 'delay.redis://')},
        extra='[retention]\nlength = {}\n'.format(kept))
    conf = backends.make_conf(config_files=[config])
    driver = redis_driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url))
    request.addfinalizer(driver.close)
    return config, driver


def test_two_daemons_remove_a_retention_backlog_once_in_all(own_redis,
                                                            tmp_path,
                                                            request):
    kept, posted = 100, 1000
    config, driver = redis_store(own_redis.url, tmp_path, kept, request)
    queues = ['q%d' % i for i in range(6)]
    messages = driver.message_controller

    def removed():
        return sum(messages.stats(queue, 'p')['retention']['removed']
                   for queue in queues)

    for queue in queues:
        driver.queue_controller.create(queue, project='p')
        for start in range(0, posted, 100):
            post(driver, queue, 'p', *range(start, start + 100))
    before = removed()
    script = os.path.join(os.path.dirname(sys.executable), 'zaqar-delay-gc')
    daemons = [subprocess.Popen(
        [script, '--config-file', config, '--once', '--verbose',
         '--tuples_per_iteration', '25'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)]
    outputs = [daemon.communicate(timeout=600) for daemon in daemons]
    assert [daemon.returncode for daemon in daemons] == [0, 0], outputs
    reported = [int(re.search(r'(\d+) removed by retention', out).group(1))
                for out, _ in outputs]
    # Nothing expired (ttl 300): a retention removal is not also counted
    # as an expired one.
    assert [int(re.search(r'(\d+) expired removed', out).group(1))
            for out, _ in outputs] == [0, 0]
    # Each removal once: the queues keep exactly their newest messages,
    # stats count every other one once, and the daemons' own counts add
    # up to what was left for them to remove.
    for queue in queues:
        assert bodies(listed(driver, queue, 'p')) == list(
            range(posted - kept, posted))
        assert messages.stats(queue, 'p')['retention']['removed'] == \
            posted - kept
    assert sum(reported) == removed() - before == \
        len(queues) * (posted - kept) - before


class Served:
    """The exporters the daemon makes, serving nothing."""

    def __init__(self, monkeypatch):
        from zaqar_delay import exporter
        self.made = []
        made, real = self.made, exporter.Exporter

        class Recording(real):
            def __init__(self, interval):
                super().__init__(interval)
                made.append(self)

            def serve(self, port, addr):
                return port

        monkeypatch.setattr(exporter, 'Exporter', Recording)


def stall_alert_fires(served):
    """etc/prometheus/zaqar-delay-alerts.yaml, ZaqarDelayGcStalled."""
    last = served.last_turn._value.get()
    interval = served.interval._value.get()
    return time.time() - last > 10 * interval + 300


def test_the_stall_alert_does_not_fire_on_a_daemon_just_started():
    """It watched the last pass's end, 0 until the first pass ended: it
    fired at every daemon's start."""
    from zaqar_delay import exporter
    assert not stall_alert_fires(exporter.Exporter(interval=60))


def test_a_daemon_whose_turns_go_to_another_hosts_pass_is_not_stalled(
        run, monkeypatch):
    """On Swift one pass runs at a time (a lease): a daemon that kept
    finding another host's pass recorded nothing, and was reported
    stalled while gc was doing its work."""
    served = Served(monkeypatch)

    class LeaseHeld(FlakyStore):
        def gc(self):
            self.passes += 1
            self.clock.now += 3600
            raise errors.GcPassRunning('held by host-b pid 42')

    run(LeaseHeld(failures=0), '--metrics_port', '9999',
        '--full_scan_time', '60', stop_after=20)
    [exporter] = served.made
    assert exporter.deferred._value.get() == 20
    assert not stall_alert_fires(exporter)
