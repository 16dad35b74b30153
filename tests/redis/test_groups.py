"""Message groups on Redis: what the contract suite
(tests/contract/test_groups.py) cannot see from outside."""

from tests.contract.helpers import bodies, claim, listed, post

GROUPED = {'_message_group_key': 'g'}


def test_a_head_filed_for_its_expiry_is_never_handed_out(
        driver, make_queue, project, clock):
    """A group's head that expires before it is due waits in
    ``Q:delayed`` under its expiry, and is filed claimable then. Met live
    by a claim (Redis's clock stepped back, as after a failover to a
    server whose clock is behind), it is not due: it goes back, and
    neither it nor the member behind it is handed out; once it expired,
    the member is."""
    queue = make_queue(dict(GROUPED, _default_message_delay=120))
    post(driver, queue, project, {'g': 'a', 'n': 1}, ttl=60)
    post(driver, queue, project, {'g': 'a', 'n': 2}, ttl=600, delay=0)
    clock.advance(61)
    listed(driver, queue, project)  # settles: the head is filed claimable
    clock.advance(-2)
    assert claim(driver, queue, project) == (None, [])
    clock.advance(2)
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'a', 'n': 2}]


def test_purging_a_group_midway_through_its_move_ends_the_move(
        driver, project, clock):
    """A move takes a group 25 messages per step; a purge of the group
    between two steps left the move standing, so gc's next step of that
    move took a message posted to the group later to the old target."""
    driver.queue_controller.create(
        'q', metadata={'_message_group_key': 'g'}, project=project)
    driver.queue_controller.create('t', project=project)
    post(driver, 'q', project, *[{'g': 'a', 'n': n} for n in range(30)])
    code, taken, done = driver.run_script('group_move', 'q', project,
                                          '"a"', 't', 'start')
    assert (code, len(taken), done) == (0, 25, 0)
    driver.message_controller.purge_group('q', 'a', project=project)
    post(driver, 'q', project, {'g': 'a', 'n': 'after'})
    clock.advance(61)
    driver.gc()
    assert bodies(listed(driver, 't', project)) == [
        {'g': 'a', 'n': n} for n in range(25)]
    assert bodies(claim(driver, 'q', project)[1]) == [{'g': 'a',
                                                      'n': 'after'}]
