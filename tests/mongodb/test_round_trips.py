"""MongoDB: requests per call, counted, never timed (issue 21).

MongoDB requests are counted with benchmarks/round_trips.py (on mongomock,
every outermost collection or database call that would send one; on a
real server, every command pymongo sends); round trips to Zaqar's control
store (Redis) on the control driver's connection pool.
"""

import datetime
import uuid

import pytest
from pymongo import errors as mongo_errors
from zaqar.storage import errors as storage_errors

from benchmarks import round_trips
from benchmarks import workloads
from localstack import backends
from tests import metadata_copies
from tests.contract.helpers import claim, listed, post
from tests.contract.test_consumers import Reader
from zaqar_delay.drivers.mongodb import clock as store_clock
from zaqar_delay.drivers.mongodb import consumers
from zaqar_delay.drivers.mongodb import driver as mongodb_driver
from zaqar_delay.drivers.mongodb import metadata

# benchmarks.round_trips.per_call on a queue holding nothing, as
# docs/mongodb.md's table shows it: (MongoDB requests, control store).
PER_CALL = {
    'post (10 messages)': (4, 0),
    'pop (1)': (5, 0),
    'claim (10)': (6, 0),
    'delete': (1, 0),
    'list': (3, 0),   # naming the client, as Zaqar's API does
    'get': (1, 0),
}


def requests(driver, call):
    """(MongoDB requests, control-store round trips) of ``call()``."""
    return round_trips.mongodb_round_trips(driver, call)


def sent(driver, call):
    """The MongoDB requests ``call()`` sends, by method name."""
    with round_trips.mongodb_counting() as names:
        call()
    return names


def second_node(driver, conf, redis_url):
    """Another API node: its own driver and control driver, same stores."""
    return mongodb_driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url),
        client_factory=driver._client_factory)


def test_each_call_sends_the_requests_the_docs_table_shows(driver, project):
    figures = round_trips.per_call(
        driver, project, workloads.fresh_queue(driver, project),
        round_trips.mongodb_round_trips)
    assert figures == PER_CALL


def test_a_pop_of_one_is_five_requests(driver, project):
    # docs/mongodb.md, *Requests per call*: the copy, the probe, the
    # claim document, one sorted findAndModify, the delete under the
    # claim; no still-live read as a claim has (the delete is the check).
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, *range(5))
    driver.message_controller.pop('q', 1, project=project)
    assert sent(driver, lambda: driver.message_controller.pop(
        'q', 1, project=project)) == [
        'find_one', 'find', 'insert_one', 'find_one_and_update',
        'delete_many']
    assert [m['body'] for m in driver.message_controller.pop(
        'q', 3, project=project)] == [2, 3, 4]


def test_a_claim_of_one_is_five_requests(driver, project):
    # docs/mongodb.md, *Requests per call*: the copy, the probe, the
    # claim document, one sorted findAndModify, the still-live check.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, *range(5))
    claim(driver, 'q', project, limit=1)   # fills and caches the copy
    assert requests(driver, lambda: claim(driver, 'q', project,
                                          limit=1)) == (5, 0)
    assert sent(driver, lambda: claim(driver, 'q', project, limit=1)) == [
        'find_one', 'find', 'insert_one', 'find_one_and_update',
        'find_one']


def test_post_claim_pop_list_and_get_read_no_control_store_once_warm(
        driver, project):
    driver.queue_controller.create('q', project=project)
    posted = post(driver, 'q', project, 'warm-up', *range(10))
    claim(driver, 'q', project)
    listed(driver, 'q', project)
    for call in (lambda: post(driver, 'q', project, *range(10)),
                 lambda: claim(driver, 'q', project, limit=10),
                 lambda: driver.message_controller.pop('q', 1,
                                                       project=project),
                 lambda: listed(driver, 'q', project),
                 lambda: driver.message_controller.get('q', posted[-1],
                                                       project=project)):
        assert requests(driver, call)[1] == 0


def test_a_metadata_change_applies_to_the_next_call_on_every_node(
        driver, conf, redis_url, project):
    metadata_copies.a_metadata_change_applies_to_the_next_call_on_every_node(
        driver, second_node(driver, conf, redis_url), project)


def test_a_queue_deleted_on_one_node_is_gone_on_the_next_call_of_another(
        driver, conf, redis_url, project):
    metadata_copies.\
        a_queue_deleted_on_one_node_is_gone_on_the_next_call_of_another(
            driver, second_node(driver, conf, redis_url), project)


@pytest.mark.parametrize('copied_before', [False, True],
                         ids=['first fill', 'fill after a change'])
def test_a_fill_that_read_the_control_store_before_a_change_is_dropped(
        driver, project, monkeypatch, copied_before):
    # The copy is missing (never made, or forgotten by a change); the fill
    # reads the old metadata from the control store, then the metadata
    # changes before the fill is stored.
    queues = driver.queue_controller
    queues.create('q', project=project)
    if copied_before:
        post(driver, 'q', project, 'copied')
        queues.set_metadata('q', {}, project=project)
    original = metadata.MongoCopies.fill

    def change_first(self, *args, **kwargs):
        queues.set_metadata('q', {'_default_message_delay': 600},
                            project=project)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(metadata.MongoCopies, 'fill', change_first)
    post(driver, 'q', project, 'old policy')   # raced: {} from before
    monkeypatch.setattr(metadata.MongoCopies, 'fill', original)
    doc = driver.queue_meta.find_one({'_id': metadata.key('q', project)})
    assert 'm' not in doc
    post(driver, 'q', project, 'delayed')
    assert [m['body'] for m in listed(driver, 'q', project)] == (
        ['copied', 'old policy'] if copied_before else ['old policy'])


def test_a_copy_is_not_used_past_its_end(driver, clock, project):
    # Bounds staleness when a change went unnoticed (written by a process
    # without this driver): here, straight into the control store.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    control_queues = driver.control_driver.queue_controller
    write = type(control_queues).set_metadata   # not the watched one
    write(control_queues, 'q', {'_default_message_delay': 600},
          project=project)
    clock.advance(61)
    post(driver, 'q', project, 'b')
    assert [m['body'] for m in listed(driver, 'q', project)] == ['a']


def test_no_call_reads_the_server_clock_between_measurements(
        driver, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')   # measures the offset
    names = sent(driver, lambda: (post(driver, 'q', project, 'a'),
                                  claim(driver, 'q', project),
                                  listed(driver, 'q', project)))
    assert 'command' not in names


def test_a_fault_makes_the_next_call_measure_the_clock_again(
        driver, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')
    raw = driver.messages.raw

    def lost(*args, **kwargs):
        raise mongo_errors.AutoReconnect('primary stepped down')

    monkeypatch.setattr(raw, 'insert_many', lost)
    with pytest.raises(storage_errors.ConnectionError):
        post(driver, 'q', project, 'lost')
    monkeypatch.undo()
    assert 'command' in sent(driver, lambda: post(driver, 'q', project, 'b'))


def test_a_slow_measurement_is_not_kept(monkeypatch):
    monotonic = [1000.0]
    monkeypatch.setattr(store_clock, '_monotonic_ms', lambda: monotonic[0])
    reads = []

    def server_time(rtt_ms):
        def read():
            reads.append(rtt_ms)
            monotonic[0] += rtt_ms
            return datetime.datetime.utcfromtimestamp(5000)
        return read

    slow = store_clock.StoreClock(
        server_time(store_clock.MAX_SYNC_RTT_MS + 1), sync_interval=10)
    assert slow() == 5_000_000
    slow()
    assert len(reads) == 2    # nothing kept: measured again
    fast = store_clock.StoreClock(server_time(10), sync_interval=10)
    fast()
    monotonic[0] += 1000
    # Kept: the server's time stands for the round trip's middle, 5 ms
    # before its end; 1 s has passed since.
    assert fast() == 5_000_000 + 5 + 1000
    assert len(reads) == 3
    monotonic[0] += 10_000    # past clock_sync_interval
    fast()
    assert len(reads) == 4


def test_a_get_reads_the_message_and_the_copy_in_one_request(
        driver, project):
    driver.queue_controller.create('q', project=project)
    posted = post(driver, 'q', project, 'a', 'b')
    driver.message_controller.get('q', posted[0], project=project)  # fills
    names = sent(driver, lambda: (
        driver.message_controller.get('q', posted[0], project=project),
        list(driver.message_controller.bulk_get('q', posted,
                                                project=project))))
    assert names == ['aggregate', 'aggregate']
    # Tried: a message that is not there; one request, and no metadata
    # needed to refuse it.
    assert requests(driver, lambda: pytest.raises(
        storage_errors.MessageDoesNotExist, driver.message_controller.get,
        'q', 'ffffffff-ffff-4fff-8fff-ffffffffffff', project=project)) \
        == (1, 0)


def test_a_get_on_another_node_keeps_to_a_retention_set_just_now(
        driver, conf, redis_url, project):
    # The other node's get joins the copy; the change forgot it, so the
    # get must read the control store, not return what is now cut.
    other = second_node(driver, conf, redis_url)
    driver.queue_controller.create('q', project=project)
    posted = post(driver, 'q', project, 'a', 'b', 'c')
    assert other.message_controller.get('q', posted[0], project=project)
    driver.queue_controller.set_metadata(
        'q', {'_retention': {'length': 1}}, project=project)
    with pytest.raises(storage_errors.MessageDoesNotExist):
        other.message_controller.get('q', posted[0], project=project)
    assert [m['body'] for m in other.message_controller.bulk_get(
        'q', posted, project=project)] == ['c']


def test_a_get_does_not_use_a_copy_past_its_end(driver, clock, project):
    driver.queue_controller.create('q', project=project)
    posted = post(driver, 'q', project, 'a', 'b')
    driver.message_controller.get('q', posted[0], project=project)
    control_queues = driver.control_driver.queue_controller
    write = type(control_queues).set_metadata   # not the watched one
    write(control_queues, 'q', {'_retention': {'length': 1}},
          project=project)
    assert driver.message_controller.get('q', posted[0], project=project)
    clock.advance(61)
    with pytest.raises(storage_errors.MessageDoesNotExist):
        driver.message_controller.get('q', posted[0], project=project)


def claimed_one_of_two_seen_from(other, driver, project):
    """Queue 'q' holds 'a' (claimed) and 'b'; ``other`` (another node)
    has listed it, so its copy says it has no persistent consumer.
    Returns ``other``."""
    driver.queue_controller.create('q', project=project)  # or exists
    post(driver, 'q', project, 'a', 'b')
    claim(driver, 'q', project, limit=1)
    assert [m['body'] for m in listed(other, 'q', project)] == ['b']
    return other


def test_a_consumer_made_on_another_node_gets_its_page_at_once(
        driver, conf, redis_url, project):
    # The other node's copy says the queue has no persistent consumer;
    # making one here forgets it, so the other node's next listing by
    # that client is a consumer page (claimed messages included), not a
    # plain listing.
    other = claimed_one_of_two_seen_from(
        second_node(driver, conf, redis_url), driver, project)
    reader = Reader(driver, 'q', project)
    reader.driver = other
    assert reader.page()[0] == ['a', 'b']


def test_a_subscriber_changed_into_a_consumer_gets_its_page_at_once(
        driver, conf, redis_url, project):
    subscriptions = driver.subscription_controller
    driver.queue_controller.create('q', project=project)
    sid = subscriptions.create('q', 'http://example.com/hook', 3600, {},
                               project=project)
    other = claimed_one_of_two_seen_from(
        second_node(driver, conf, redis_url), driver, project)
    reader_id = uuid.uuid4()
    subscriptions.update('q', sid, project=project,
                         subscriber='cursor:' + str(reader_id))
    page = other.message_controller.list('q', project=project,
                                         client_uuid=reader_id)
    assert [m['body'] for m in next(page)] == ['a', 'b']


def test_a_fill_that_counted_consumers_before_one_was_made_is_dropped(
        driver, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')
    claim(driver, 'q', project, limit=1)
    driver.queue_controller.set_metadata('q', {}, project=project)
    readers = []
    original = consumers.any_live

    def consumer_made_after_counting(*args):
        found = original(*args)
        readers.append(Reader(driver, 'q', project))
        return found

    monkeypatch.setattr(consumers, 'any_live', consumer_made_after_counting)
    listed(driver, 'q', project)        # the miss fills, raced
    monkeypatch.setattr(consumers, 'any_live', original)
    doc = driver.queue_meta.find_one({'_id': metadata.key('q', project)})
    assert 'm' not in doc
    assert readers[0].page()[0] == ['a', 'b']


def test_a_listing_skips_the_consumer_lookup_only_where_none_exists(
        driver, project):
    driver.queue_controller.create('plain', project=project)
    driver.queue_controller.create('read', project=project)
    for queue in ('plain', 'read'):
        post(driver, queue, project, 'a')
    Reader(driver, 'read', project)
    for queue in ('plain', 'read'):
        listed(driver, queue, project, client_uuid=uuid.uuid4())
    plain = sent(driver, lambda: listed(driver, 'plain', project,
                                        client_uuid=uuid.uuid4()))
    read = sent(driver, lambda: listed(driver, 'read', project,
                                       client_uuid=uuid.uuid4()))
    # listed() reads until an empty page: two listings each.
    assert len(read) - len(plain) == 2
