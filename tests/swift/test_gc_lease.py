"""One ``zaqar-delay-gc`` pass at a time per Swift account (gc_lease.py).

Two gc passes on one Swift can misfile a dead-letter copy (docs/swift.md),
so a pass holds a lease object while it runs: a second ``zaqar-delay-gc``,
a real process started while the first (stopped by SIGSTOP) is half way
through a retention backlog, does nothing and says who holds the lease;
a lease whose holder died expires; a pass whose lease was taken stops
between two queues.
"""

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from localstack import backends
from tests.contract.helpers import post
from tests.contract.helpers import raise_layout_version
from localstack.factories import swift as swift_factory
from localstack import zaqar_server
from zaqar_delay import errors
from zaqar_delay.cmd import gc as gc_command
from zaqar_delay.drivers.swift import gc_lease

KEPT, POSTED, BATCH = 10, 100, 5


@pytest.fixture
def driver(swift_server, redis_url, request):
    from zaqar_delay.drivers.swift import driver as swift_driver
    conf = backends.make_conf()
    conf.set_override('uri', swift_factory.swift_uri(swift_server),
                      group='drivers:message_store:delay.swift')
    made = swift_driver.DataDriver(conf, None,
                                   backends.control_driver(conf, redis_url))
    request.addfinalizer(made.close)
    # Whatever a test leaves, the session's later gc() calls must run.
    request.addfinalizer(lambda: made.store.delete(gc_lease.CONTAINER,
                                                   gc_lease.OBJECT))
    return made


def gc_process(config, *flags):
    script = os.path.join(os.path.dirname(sys.executable), 'zaqar-delay-gc')
    return subprocess.Popen(
        [script, '--config-file', config, '--once', '--verbose', *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_second_gc_pass_is_refused_while_one_runs(
        driver, swift_server, redis_url, tmp_path):
    config = zaqar_server.write_config(
        str(tmp_path), redis_url, 0, 'delay.swift',
        {'uri': swift_factory.swift_uri(swift_server)},
        extra='[retention]\nlength = {}\n'.format(KEPT))
    queue, project = 'q-' + uuid.uuid4().hex[:8], 'lease'
    driver.queue_controller.create(queue, project=project)
    post(driver, queue, project, *range(POSTED))

    def removed():
        return driver.message_controller.stats(
            queue, project)['retention']['removed']

    # The first pass removes the backlog in batches of BATCH. Once it has
    # removed some, it is stopped (SIGSTOP) half way through, holding its
    # lease (LEASE_S is minutes), however long the second takes to start
    # on a loaded machine; it goes on (SIGCONT) once the second is done.
    first = gc_process(config, '--tuples_per_iteration', str(BATCH),
                       '--iteration_delay', '0.2')
    try:
        deadline = time.monotonic() + 120
        while removed() == 0:
            assert first.poll() is None and time.monotonic() < deadline, \
                first.communicate()
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)
        midway = removed()
        second = gc_process(config)
        out, err = second.communicate(timeout=300)
        still_running = first.poll() is None
    finally:
        first.send_signal(signal.SIGCONT)
        first_out, first_err = first.communicate(timeout=300)
    assert 0 < midway < POSTED - KEPT, midway
    assert second.returncode == gc_command.EXIT_ANOTHER_PASS_RUNNING, (
        out, err)
    assert still_running, 'the first pass ended before the second began'
    assert 'gc pass' not in out
    assert re.search(r'another zaqar-delay-gc pass holds the gc lease of '
                     r'this Swift account \(host \S+, pid {}'.format(
                         first.pid), out + err), (out, err)
    # The first pass went on to the end, and was the only one.
    assert first.returncode == 0, (first_out, first_err)
    # Its pass covers every queue of the test Swift (other tests' too):
    # this queue's removals are part of its count.
    assert int(re.search(r'(\d+) removed by retention',
                         first_out).group(1)) >= POSTED - KEPT, first_out
    assert removed() == POSTED - KEPT
    # Its lease is gone: the next pass runs.
    assert driver.store.head(gc_lease.CONTAINER, gc_lease.OBJECT) is None
    driver.gc()


def test_a_lease_left_by_a_dead_gc_expires(driver, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(gc_lease, 'LEASE_S', 2)
        gc_lease.GcLease(driver.store).acquire()    # never released
    if driver.store.head(gc_lease.CONTAINER, gc_lease.OBJECT):
        with pytest.raises(errors.GcPassRunning):
            driver.exclusive_gc()
    # Swift answers 404 for an object past its X-Delete-At, and lets
    # If-None-Match: * create it again.
    while driver.store.head(gc_lease.CONTAINER, gc_lease.OBJECT):
        time.sleep(0.2)
    driver.gc()


def test_a_pass_whose_lease_was_taken_stops_between_queues(driver,
                                                          monkeypatch):
    for queue in ('a', 'b'):
        driver.queue_controller.create(queue, project='lease-taken')
        post(driver, queue, 'lease-taken', 1)
    monkeypatch.setattr(gc_lease, 'RENEW_AFTER_S', 0)
    thief = gc_lease.GcLease(driver.store)

    def steal(container):
        # Another host's pass took the lease (ours had expired).
        driver.store.delete(gc_lease.CONTAINER, gc_lease.OBJECT)
        thief.acquire()
        return 0

    monkeypatch.setattr(driver, '_gc_and_clean', steal)
    with pytest.raises(errors.GcPassRunning, match='Stopped between two '
                                                   'queues'):
        driver.exclusive_gc()
    # The pass left the thief's lease alone.
    assert thief._ours()


def test_zaqars_gc_hook_is_not_failed_by_another_hosts_pass(driver):
    """pooling's gc of every pool calls gc(): another host's
    pass doing the work is no error for them (nor a reason to stop before
    their other pools); only zaqar-delay-gc, through exclusive_gc(),
    reports it."""
    driver.queue_controller.create('held', project='lease-held')
    post(driver, 'held', 'lease-held', 1)
    other_host = gc_lease.GcLease(driver.store)
    other_host.acquire()
    try:
        with pytest.raises(errors.GcPassRunning):
            driver.exclusive_gc()
        assert driver.gc().queues == 0
        assert other_host._ours()
    finally:
        other_host.release()


def test_a_host_that_cannot_read_the_layout_says_so_and_takes_no_lease(
        driver):
    """A gc host left running when an upgrade raised the layout version
    reports the mismatch even while another host's pass holds the lease
    (not "a pass is running", which zaqar-delay-gc does not count as a
    failure), and never takes the lease itself: it would hold back the
    passes of the hosts that can read the store."""
    other_host = gc_lease.GcLease(driver.store)
    other_host.acquire()
    put_back = raise_layout_version(driver)
    try:
        with pytest.raises(errors.LayoutMismatch):
            driver.exclusive_gc()
        other_host.release()
        with pytest.raises(errors.LayoutMismatch):
            driver.exclusive_gc()
        assert driver.store.head(gc_lease.CONTAINER, gc_lease.OBJECT) is None
    finally:
        put_back()
        other_host.release()
