"""Swift: what one message listing costs does not grow with the queue
(requests counted on the real test Swift, never timed).

A client listing with ``echo=false`` (Zaqar's default) skips the messages
it posted itself. Each listing entry names its poster, so skipping them
reads no message; and a call reads at most ``READS_PER_MESSAGE`` messages
per message asked for and lists at most ``MAX_PAGES`` pages, then ends
with a short page whose marker is past everything it looked at.
"""

import re

import pytest

from tests.contract.helpers import OTHER_CLIENT, bodies, post
from tests.swift.requests import Requests
from zaqar_delay.drivers.swift import scan

LIMIT = 10
# Twice what one call may read: a listing that read its caller's own
# messages would spend its budget on them before reaching another's.
BACKLOG = 2 * scan.READS_PER_MESSAGE * LIMIT
# Entries that name no poster: the first call's budget runs out in them,
# and so does the next one's.
UNREAD_BACKLOG = 2 * scan.READS_PER_MESSAGE * LIMIT
# Settling, the group check, the retention cut and the listings of one
# call, whatever the queue holds; messages read are counted apart.
FIXED_REQUESTS = 4 + scan.MAX_PAGES
# A message read is one GET, or with include_claimed (or on a grouped
# queue) a GET, its lock listing and HEADs: at most 6 requests.
REQUESTS_PER_READ = 6

# Queues (metadata, body of message n) and the listing options tried on
# each: a backlog is filled once per queue, as filling Swift is what these
# tests spend their time on, and listing it changes nothing.
PLAIN = ({}, lambda n: n)
GROUPED = ({'_message_group_key': 'g'},
           lambda n: {'g': 'g' + str(n)[-1], 'n': n})
QUEUES = {
    'plain': (PLAIN, [{}, {'include_claimed': True}]),
    'grouped': (GROUPED, [{}]),
}


def bound(reads):
    return FIXED_REQUESTS + REQUESTS_PER_READ * reads


def page(driver, queue, project, marker=None, **kwargs):
    """One call of Zaqar's list, as the client that posted the backlog."""
    pages = driver.message_controller.list(
        queue, project=project, marker=marker, limit=LIMIT, echo=False,
        client_uuid=CLIENT_OF_BACKLOG, **kwargs)
    return list(next(pages)), next(pages)


CLIENT_OF_BACKLOG = 'aaaaaaaa-1111-4111-8111-111111111111'


def backlog(driver, queue, project, body, size=BACKLOG):
    for start in range(0, size, 100):
        post(driver, queue, project,
             *[body(n) for n in range(start, min(start + 100, size))],
             client=CLIENT_OF_BACKLOG)


@pytest.mark.parametrize('queue_kind', sorted(QUEUES))
def test_a_listing_by_the_poster_of_a_backlog_reads_no_message_of_it(
        driver, make_queue, project, monkeypatch, queue_kind):
    (metadata, body), tried = QUEUES[queue_kind]
    queue = make_queue(metadata)
    backlog(driver, queue, project, body)
    post(driver, queue, project, body('a'), body('b'), client=OTHER_CLIENT)
    requests = Requests(driver, monkeypatch)
    for options in tried:
        found = []
        cost = requests.during(lambda: found.extend(
            page(driver, queue, project, **options)[0]))
        assert bodies(found) == [body('a'), body('b')], options
        assert cost <= bound(2), (options, requests.calls)


def forget_posters(driver, queue, project):
    """Rewrite the backlog's a/ and p/ entries without their poster, as
    the versions before the poster was recorded wrote them."""
    qs = driver.queue_state(queue, project)
    for prefix in ('a/', 'p/'):
        for entry in driver.store.listing_all(qs.c, prefix):
            driver.store.put(qs.c, entry['name'], content_type=re.sub(
                ';u=[^;]*', '', entry['content_type']))


@pytest.mark.parametrize('queue_kind', sorted(QUEUES))
def test_entries_without_their_poster_cost_a_bounded_number_of_reads(
        driver, make_queue, project, monkeypatch, queue_kind):
    (metadata, body), tried = QUEUES[queue_kind]
    queue = make_queue(metadata)
    post(driver, queue, project, body('first'), client=OTHER_CLIENT)
    # More than one call may read.
    backlog(driver, queue, project, body, size=UNREAD_BACKLOG)
    post(driver, queue, project, body('late'), client=OTHER_CLIENT)
    forget_posters(driver, queue, project)
    requests = Requests(driver, monkeypatch)
    for options in tried:
        pages = []
        cost = requests.during(lambda: pages.append(
            page(driver, queue, project, **options)))
        found, marker = pages[0]
        assert cost <= bound(scan.READS_PER_MESSAGE * LIMIT), (
            options, requests.calls)
        # A short page, whose marker is past the entries it read: the
        # next page goes on from there, not from 'first' again.
        assert bodies(found) == [body('first')], options
        assert int(marker) > found[0].position
        late = []
        for _ in range(UNREAD_BACKLOG // (scan.READS_PER_MESSAGE * LIMIT)
                       + 2):
            found, marker = page(driver, queue, project, marker, **options)
            late.extend(found)
            if late:
                break
        assert bodies(late) == [body('late')], options
