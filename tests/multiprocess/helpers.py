"""Running producers and consumers of the multi-process tests."""

import collections

from tests.contract.helpers import listed
from tests.multiprocess import workers

WAIT_S = 300


def run_producers_and_consumers(team, queue, project, producers, consumers,
                                plan, stop=None):
    """``producers`` = [(count, batch, groups)] posting while consumers
    (one Plan each in ``consumers``) claim, with whatever workers the
    team has already; ``stop`` set once the consumers are done. (Posted
    per producer, hand-outs, problems) once all workers have ended."""
    produced, handed, posted_all = team.Queue(), team.Queue(), team.Event()
    for index, (count, batch, groups) in enumerate(producers):
        team.spawn(workers.produce, queue, project, index, count, batch,
                   groups, produced)
    for consumer_plan in consumers:
        team.spawn(workers.consume, queue, project, consumer_plan,
                   posted_all, handed)
    team.start()
    posted = [team.get(produced, WAIT_S) for _ in producers]
    posted_all.set()
    results = [team.get(handed, plan.give_up_s + 60) for _ in consumers]
    if stop is not None:
        stop.set()
    team.join()
    handouts = [h for found, _ in results for h in found]
    problems = [p for _, found in results for p in found]
    return posted, handouts, problems


def ids(posted):
    return [mid for batch in posted for mid, _ in batch]


def positions(driver, queue, project):
    """{id: position} of every message a listing shows."""
    return {m['id']: m.position for m in listed(
        driver, queue, project, include_claimed=True)}


def check_refused_acks(handouts, claim_ttl):
    """A delete is only refused once its claim may have expired: the
    claim's clock is read after its request began."""
    for h in handouts:
        if h.ack_error is not None:
            assert h.ack_done - h.began >= claim_ttl - 0.05, h


def by(handouts, key):
    grouped = collections.defaultdict(list)
    for handout in handouts:
        grouped[key(handout)].append(handout)
    return grouped
