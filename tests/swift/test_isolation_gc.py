"""Project isolation and gc on Swift."""

from tests.contract.helpers import bodies, claim, listed, post, stats


def test_same_queue_name_in_tricky_projects(driver, project):
    others = [project + ':x', project + '/x', project + '%3Ax',
              'x' * 200 + project]
    for name in [project] + others:
        driver.queue_controller.create('q', project=name)
        post(driver, 'q', name, name)
    for name in [project] + others:
        assert bodies(listed(driver, 'q', name)) == [name]
        assert stats(driver, 'q', name)['total'] == 1
        assert bodies(claim(driver, 'q', name)[1]) == [name]


def test_gc_removes_expired_messages_physically(driver, make_queue,
                                                project, clock):
    queue = make_queue()
    post(driver, queue, project, 'short', ttl=60)
    post(driver, queue, project, 'long', ttl=600)
    claim(driver, queue, project, limit=1, ttl=60, grace=0)
    clock.advance(61)
    assert driver.gc().expired >= 1
    qs = driver.queue_state(queue, project)
    left = [e['name'] for e in driver.store.listing_all(qs.c, '')]
    assert not [n for n in left if n.startswith(('p/', 'm/', 'c/', 'x/'))
                and 'short' in n]
    assert sum(n.startswith('m/') for n in left) == 1
    assert bodies(claim(driver, queue, project)[1]) == ['long']


def test_gc_finishes_an_abandoned_dead_letter_move(driver, make_queue,
                                                   project, clock):
    from zaqar_delay.drivers.swift import names
    dlq = make_queue(name='dlq')
    queue = make_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    mid = post(driver, queue, project, 'poison')[0]
    qs = driver.queue_state(queue, project)
    # A node won the dead-letter lock of attempt 1 and died.
    driver.store.create(qs.c, names.lock_obj(mid, 1),
                              content_type=names.content_type(c=names.DEAD))
    driver.store.delete(qs.c, names.avail_obj(
        listed(driver, queue, project)[0].position, mid, 1))
    clock.advance(120)
    driver.gc()
    assert bodies(listed(driver, dlq, project)) == ['poison']
    assert stats(driver, queue, project)['total'] == 0


def test_a_mass_expiry_is_removed_a_bounded_number_a_visit(
        driver, make_queue, project, clock, monkeypatch):
    """gc removed every expired message a deep pass listed in one step
    (100,000 expiring together: 500 bulk deletes, the lease unchecked),
    holding the pass from every other queue. Now SETTLE_BATCH at a time,
    VISIT_STEPS batches a visit, the rest on the queue's next visit
    after the others', in the same pass."""
    from zaqar_delay import driver as base_driver
    from zaqar_delay.drivers.swift import names
    from zaqar_delay.drivers.swift import state
    monkeypatch.setattr(state, 'SETTLE_BATCH', 2)
    queue = make_queue()
    post(driver, queue, project, *range(2 * base_driver.VISIT_STEPS + 5),
         ttl=60)
    clock.advance(61)
    mine = names.container(names.MESSAGES, queue, project)
    per_visit, remove_expired = [], driver._remove_expired

    def counted(qs, expired, positions, now):
        done, left = remove_expired(qs, expired, positions, now)
        if qs.c == mine:
            per_visit.append(done)
        return done, left

    monkeypatch.setattr(driver, '_remove_expired', counted)
    driver.gc()
    assert per_visit == [2 * base_driver.VISIT_STEPS, 5]
    assert not driver.store.listing_all(mine, 'm/')
