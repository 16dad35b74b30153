"""Zaqar's queue purge on a sticky queue, through Zaqar's REST API: one
purge empties the queue, groups pinned to an active client included,
whatever `[transport] max_messages_per_claim_or_pop` says (api-ref,
queues.inc and claims.inc)."""

import pytest

from tests.integration.conftest import Client

pytestmark = pytest.mark.integration

RAISED_POP_BOUND = '\n[transport]\nmax_messages_per_claim_or_pop = 100\n'


def purge_leaves_nothing_of_a_pinned_group(zaqar_url, project):
    worker = Client(zaqar_url, project)
    admin = Client(zaqar_url, project)
    assert worker.call('PUT', '/queues/jobs', json={
        '_message_group_key': 'g',
        '_message_group_sticky': 600}).status_code == 201
    assert worker.post('jobs', *[{'ttl': 600, 'body': {'g': 'a', 'n': n}}
                                 for n in range(3)]).status_code == 201
    # The worker takes group a's head and acknowledges it: group a is
    # pinned to it (an active client), its two other messages unclaimed.
    (head,) = worker.claim('jobs', limit=1)
    assert worker.call('DELETE', head['href'].split('/v2', 1)[1]
                       ).status_code == 204
    assert worker.stats('jobs')['free'] == 2
    # One purge, by another client (Zaqar pops until a pop is empty).
    reply = admin.call('POST', '/queues/jobs/purge',
                       json={'resource_types': ['messages']})
    assert reply.status_code == 204, reply.text
    assert admin.stats('jobs')['total'] == 0


def test_one_purge_empties_a_sticky_queue_with_a_pinned_group(
        zaqar_url, project):
    """On Swift the purge's first pop left the popped head's pinned
    filing, which its second pop met first and let hide the group's next
    message: the second pop came back empty and one message stayed."""
    purge_leaves_nothing_of_a_pinned_group(zaqar_url, project)


@pytest.mark.parametrize('operator_config', [RAISED_POP_BOUND],
                         ids=['pop-bound-100'])
def test_purge_empties_a_sticky_queue_with_the_pop_bound_raised_to_100(
        zaqar_url, project):
    """With the bound at 100, the purge's pops of 100 are ones a client
    may make: known by their size alone, they popped as the purging
    client and left the group pinned to the worker."""
    purge_leaves_nothing_of_a_pinned_group(zaqar_url, project)
