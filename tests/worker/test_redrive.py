"""Redriving dead letters by id exactly once, against a live zaqar-server
on our Redis driver. The interleavings are made by running one redrive
inside a Zaqar call of the other, so they need no timing."""

import time

import pytest

from tests.worker.helpers import make_app
from zaqar_delay.worker import cli
from zaqar_delay.worker import events

pytestmark = pytest.mark.integration

DEAD = 't-Redo-dead'


def dead_letters(app, count):
    """Post ``count`` events straight to the dead-letter queue; their ids."""
    letters = [{'ttl': 600, 'body': events.envelope(
        'Redo', {'n': n}, {'k': n}, time.time())} for n in range(count)]
    return [message_id for start in range(0, count, 20)
            for message_id in app.connection.post(DEAD,
                                                  letters[start:start + 20])]


def copies(app):
    return app.connection.stats('t-Redo')['total']


def run_first(connection, method, action):
    """Run ``action`` once, just before the first call of ``method``."""
    real = getattr(connection, method)

    def wrapped(*args, **kwargs):
        setattr(connection, method, real)
        action()
        return real(*args, **kwargs)

    setattr(connection, method, wrapped)


def test_two_redrives_of_one_id_at_once_put_back_one_copy(zaqar_url,
                                                          project):
    first, second = (make_app(zaqar_url, project) for _ in range(2))
    [letter] = dead_letters(first, 1)
    results = []
    # The second redrive runs whole while the first is about to post.
    run_first(first.connection, 'post', lambda: results.append(
        second.redrive('Redo', ids=[letter])))
    results.append(first.redrive('Redo', ids=[letter]))
    assert sorted(results) == [0, 1]
    assert copies(first) == 1
    assert first.connection.stats(DEAD)['total'] == 0


def test_an_id_claimed_after_it_was_read_is_not_posted(zaqar_url, project):
    app, other = (make_app(zaqar_url, project) for _ in range(2))
    [letter] = dead_letters(app, 1)
    # Read free, then taken by another redrive before this one claims it.
    claims = []
    run_first(app.connection, 'claim', lambda: claims.append(
        other.connection.claim(DEAD, 1, 60, 60)))
    assert app.redrive('Redo', ids=[letter]) == 0
    assert copies(app) == 0
    assert [d.id for d in app.dead_letters('Redo')] == [letter]


def test_an_id_held_by_another_claim_is_neither_posted_nor_reported_moved(
        zaqar_url, project, monkeypatch, capsys):
    app = make_app(zaqar_url, project)
    held, free = dead_letters(app, 2)
    # A full redrive (or any reader) holds the first dead letter.
    claim, [taken] = app.connection.claim(DEAD, 1, 60, 60)
    assert taken.id == held
    assert app.redrive('Redo', ids=[held, free]) == 1
    assert copies(app) == 1
    assert [d.id for d in app.dead_letters('Redo')] == [held]

    for key, value in (('ZD_TEST_URL', zaqar_url),
                       ('ZD_TEST_PROJECT', project),
                       ('ZD_TEST_PREFIX', 't-')):
        monkeypatch.setenv(key, value)
    assert cli.dead_letters_main(['tests.worker.apps:base_app', 'redrive',
                                  'Redo', '--id', held]) == 1
    assert capsys.readouterr().out.splitlines() == [
        'redriven: 0', 'held by another claim, not moved: ' + held]
    assert copies(app) == 1

    claim.delete()      # once released, it moves
    assert app.redrive_report('Redo', ids=[held]).moved == [held]
    assert copies(app) == 2
    assert app.dead_letters('Redo') == []


def test_a_redrive_retried_after_a_lost_post_reply_does_not_duplicate(
        zaqar_url, project):
    app = make_app(zaqar_url, project)
    [letter] = dead_letters(app, 1)
    real = app.connection.post

    def posted_then_lost(*args, **kwargs):
        real(*args, **kwargs)
        raise ConnectionError('reply lost')

    app.connection.post = posted_then_lost
    with pytest.raises(ConnectionError):
        app.redrive('Redo', ids=[letter])
    app.connection.post = real
    # The dead letter stays under the first run's claim until it expires,
    # so the retry does not post it again.
    assert app.redrive('Redo', ids=[letter]) == 0
    assert copies(app) == 1
    assert app.redrive_report('Redo', ids=[letter]).held == [letter]


def test_a_dead_letter_taken_by_another_claim_mid_redrive_is_not_moved(
        zaqar_url, project):
    app, other = (make_app(zaqar_url, project) for _ in range(2))
    [letter] = dead_letters(app, 1)

    def steal():
        # This redrive's claim ends (as after claim_ttl) and another
        # takes the letter: its delete under the old claim is refused.
        [found] = other.connection.get_many(DEAD, [letter])
        other.connection.queue(DEAD).claim(id=found.claim_id).delete()
        other.connection.claim(DEAD, 1, 60, 60)

    run_first(app.connection, 'post', steal)
    assert app.redrive('Redo') == 0
    assert [d.id for d in app.dead_letters('Redo')] == [letter]


def test_a_redrive_by_id_past_the_first_page_releases_what_it_passed(
        zaqar_url, project):
    app = make_app(zaqar_url, project)
    letters = dead_letters(app, 25)
    assert app.redrive('Redo', ids=[letters[-1]]) == 1
    [moved] = app.connection.messages('t-Redo')
    assert (moved.body['data'], moved.body['context']) == ({'n': 24},
                                                           {'k': 24})
    # The 24 it claimed on its way are free again for the next redrive.
    assert app.redrive('Redo') == 24
    assert copies(app) == 25
