"""Project isolation and gc on Swift."""

from tests.contract.helpers import bodies, claim, listed, post, stats


def test_same_queue_name_in_tricky_projects(swift_driver, project):
    others = [project + ':x', project + '/x', project + '%3Ax',
              'x' * 200 + project]
    for name in [project] + others:
        swift_driver.queue_controller.create('q', project=name)
        post(swift_driver, 'q', name, name)
    for name in [project] + others:
        assert bodies(listed(swift_driver, 'q', name)) == [name]
        assert stats(swift_driver, 'q', name)['total'] == 1
        assert bodies(claim(swift_driver, 'q', name)[1]) == [name]


def test_gc_removes_expired_messages_physically(swift_driver, swift_queue,
                                                project, swift_clock):
    queue = swift_queue()
    post(swift_driver, queue, project, 'short', ttl=60)
    post(swift_driver, queue, project, 'long', ttl=600)
    claim(swift_driver, queue, project, limit=1, ttl=60, grace=0)
    swift_clock.advance(61)
    assert swift_driver.gc() >= 1
    qs = swift_driver.queue_state(queue, project)
    left = [e['name'] for e in swift_driver.store.listing_all(qs.c, '')]
    assert not [n for n in left if n.startswith(('p/', 'm/', 'c/', 'x/'))
                and 'short' in n]
    assert sum(n.startswith('m/') for n in left) == 1
    assert bodies(claim(swift_driver, queue, project)[1]) == ['long']


def test_gc_finishes_an_abandoned_dead_letter_move(swift_driver, swift_queue,
                                                   project, swift_clock):
    from zaqar_delay.drivers.swift import names
    dlq = swift_queue(name='dlq')
    queue = swift_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    mid = post(swift_driver, queue, project, 'poison')[0]
    qs = swift_driver.queue_state(queue, project)
    # A node won the dead-letter lock of attempt 1 and died.
    swift_driver.store.create(qs.c, names.lock_obj(mid, 1),
                              content_type=names.content_type(c=names.DEAD))
    swift_driver.store.delete(qs.c, names.avail_obj(
        int(listed(swift_driver, queue, project)[0]['marker']), mid, 1))
    swift_clock.advance(120)
    swift_driver.gc()
    assert bodies(listed(swift_driver, dlq, project)) == ['poison']
    assert stats(swift_driver, queue, project)['total'] == 0
