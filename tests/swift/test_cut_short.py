"""Swift: calls cut short by a failing request, against a real Swift.

Each test makes one kind of Swift request fail (``cut``: the swiftclient
call raises as if the proxy dropped the connection, after every retry),
at the exact step, and checks what clients and gc see afterwards.
"""

import contextlib

import pytest
import swiftclient
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import bodies, claim, listed, post, stats
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import pops

GROUPED = {'_message_group_key': 'g'}


@pytest.fixture
def cut(monkeypatch):
    """``with cut('put_object', 'a/'):`` makes every swiftclient
    ``put_object`` of an object named ``a/...`` fail (optionally in one
    ``container`` only, after the first ``after`` of them)."""
    @contextlib.contextmanager
    def cutting(method, prefix='', container=None, after=0):
        real = getattr(swiftclient.Connection, method)
        seen = []

        def failing(self, *args, **kwargs):
            name = str(args[1]) if len(args) > 1 else ''
            if (name.startswith(prefix)
                    and container in (None, args[0] if args else None)):
                seen.append(name)
                if len(seen) > after:
                    raise ConnectionResetError('cut: {} {}'.format(
                        method, name))
            return real(self, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(swiftclient.Connection, method, failing)
            yield seen
    return cutting


def objects(driver, queue, project, prefix=''):
    container = names.container(names.MESSAGES, queue, project)
    return [e['name'] for e in driver.store.listing_all(container, prefix)]


def gc(driver, queue, project, clock):
    """gc of one queue once every lock and draft is old enough to act on
    (driver.gc() walks every queue of the session's Swift)."""
    clock.advance(600)
    driver._gc_queue(names.container(names.MESSAGES, queue, project))


# -- pops -------------------------------------------------------------------

def test_a_pop_whose_removal_fails_hands_out_what_it_won(
        driver, make_queue, project, clock, cut):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', ttl=3600)
    # Removal is one bulk delete (POST to the account), or one DELETE each
    # without the bulk middleware.
    with cut('post_account'), cut('delete_object'):
        got = driver.message_controller.pop(queue, 5, project=project)
    assert bodies(got) == ['a', 'b']
    gc(driver, queue, project, clock)
    assert claim(driver, queue, project) == (None, [])
    assert stats(driver, queue, project)['total'] == 0
    assert objects(driver, queue, project, 'm/') == []


def test_gc_gives_back_what_a_pop_that_failed_had_locked(
        driver, make_queue, project, clock, cut):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', ttl=3600)
    # The pop has locked both, then cannot read them.
    with cut('get_object', 'm/'):
        with pytest.raises(storage_errors.ConnectionError):
            driver.message_controller.pop(queue, 5, project=project)
    assert claim(driver, queue, project) == (None, [])
    gc(driver, queue, project, clock)
    assert bodies(claim(driver, queue, project)[1]) == ['a', 'b']


def test_a_pop_that_gc_took_for_dead_hands_out_nothing(
        driver, make_queue, project, clock, monkeypatch):
    queue = make_queue()
    post(driver, queue, project, 'a', ttl=3600)
    real = pops.finish

    def late(qs, pop_id, won, now):
        # The pop stalls past gc's patience; gc releases its messages.
        gc(driver, queue, project, clock)
        return real(qs, pop_id, won, now)

    monkeypatch.setattr(pops, 'finish', late)
    assert driver.message_controller.pop(queue, 5, project=project) == []
    monkeypatch.undo()
    assert bodies(claim(driver, queue, project)[1]) == ['a']


def test_gc_finishes_a_pop_that_answered(driver, make_queue, project,
                                         clock, cut):
    """The outcome is written before the removal: once it says done, gc
    removes, it never gives back."""
    queue = make_queue(GROUPED)
    post(driver, queue, project, {'g': 'x', 'n': 1}, {'g': 'x', 'n': 2},
         ttl=3600)
    with cut('post_account'), cut('delete_object'):
        got = driver.message_controller.pop(queue, 5, project=project)
    assert bodies(got) == [{'g': 'x', 'n': 1}]
    gc(driver, queue, project, clock)
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'x', 'n': 2}]
