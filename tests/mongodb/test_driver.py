"""Driver edge: URIs, options, faults, clock, gc, health."""

import datetime

import pymongo
import pytest
from pymongo import errors as mongo_errors
from zaqar.storage import errors as storage_errors

from localstack import backends
from tests.contract.helpers import (
    check_an_api_clock_ahead_hands_out_nothing_early, claim, post, stats)
from zaqar_delay import conf as zd_conf
from zaqar_delay import errors
from zaqar_delay import stages
from zaqar_delay.conf import mongodb as mongodb_conf
from zaqar_delay.drivers.mongodb import clock as store_clock
from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import driver as mongodb_driver
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import messages as mongo_messages


@pytest.mark.parametrize('uri, expected', [
    ('delay.mongodb://h:27017/db', 'mongodb://h:27017/db'),
    ('mongodb://u:p@h1,h2/?replicaSet=rs',
     'mongodb://u:p@h1,h2/?replicaSet=rs'),
    ('delay.mongodb+srv://cluster.example.org',
     'mongodb+srv://cluster.example.org'),
])
def test_both_uri_schemes_are_accepted(uri, expected):
    assert connection.mongodb_uri(uri) == expected


@pytest.mark.parametrize('uri', ['redis://h', 'h:27017', 'delay.redis://h'])
def test_other_uris_are_refused(uri):
    with pytest.raises(ValueError):
        connection.mongodb_uri(uri)


def test_options_are_listed_documented_and_the_uri_is_secret():
    assert (mongodb_conf.GROUP_NAME, mongodb_conf.ALL_OPTS) in \
        zd_conf.list_opts()
    assert mongodb_conf.GROUP_NAME == 'drivers:message_store:delay.mongodb'
    assert mongodb_conf.uri.secret
    for option in mongodb_conf.ALL_OPTS:
        assert option.help.endswith('.') and option.help[0].isupper()


def test_entry_point_names_the_driver():
    from importlib import metadata
    points = {e.name: e.value
              for e in metadata.entry_points(group='zaqar.data.storage')}
    assert points['delay.mongodb'] == \
        'zaqar_delay.drivers.mongodb.driver:DataDriver'
    stages = metadata.entry_points(
        group='zaqar_delay.drivers.mongodb.driver.queue.stages')
    assert [e.value for e in stages] == ['zaqar_delay.stages:QueueStage']


class Failing:
    def __init__(self, exc):
        self.exc = exc

    def update_many(self, *args, **kwargs):
        raise self.exc

    def find(self, *args, **kwargs):
        raise self.exc


@pytest.mark.parametrize('exc', [
    mongo_errors.AutoReconnect('lost'),
    mongo_errors.ServerSelectionTimeoutError('no primary'),
    mongo_errors.NetworkTimeout('slow'),
    mongo_errors.ExecutionTimeout('too long'),
    mongo_errors.OperationFailure('refused'),
])
def test_backend_faults_become_zaqar_connection_errors(exc):
    guarded = connection.GuardedCollection(Failing(exc))
    with pytest.raises(storage_errors.ConnectionError) as raised:
        guarded.update_many({}, {})
    assert isinstance(raised.value, errors.BackendUnavailable)
    with pytest.raises(storage_errors.ConnectionError):
        guarded.find({})


def test_duplicate_keys_pass_through_for_the_controllers():
    guarded = connection.GuardedCollection(
        Failing(mongo_errors.DuplicateKeyError('dup', 11000)))
    with pytest.raises(mongo_errors.DuplicateKeyError):
        guarded.update_many({}, {})


def test_unreachable_server_is_a_503_not_a_stack_trace(request, redis_url):
    conf = backends.make_conf()
    conf.set_override('uri', 'delay.mongodb://127.0.0.1:9',
                      group=mongodb_conf.GROUP_NAME)
    conf.set_override('server_selection_timeout', 0.2,
                      group=mongodb_conf.GROUP_NAME)
    driver = mongodb_driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url),
        client_factory=pymongo.MongoClient)
    assert driver.is_alive() is False
    with pytest.raises(storage_errors.ConnectionError):
        driver.messages.find({})
    driver.close()


def test_time_comes_from_the_server_unless_a_test_clock_is_set(driver):
    before = datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000
    now = driver.now()
    assert abs(now - before) < 5000
    driver.use_clock(lambda: 42_000)
    assert driver.now() == 42_000
    driver.use_clock(None)
    assert abs(driver.now() - before) < 5000


def test_an_api_node_clock_an_hour_ahead_hands_out_nothing_early(
        driver, project, monkeypatch):
    # Due times come from the server's clock (hello.localTime, plus the
    # monotonic clock between measurements), never this process's.
    check_an_api_clock_ahead_hands_out_nothing_early(driver, project,
                                                     monkeypatch)


def test_clock_sync_interval_adds_a_measured_offset():
    reads = []

    def server():
        reads.append(1)
        moment = datetime.datetime.now(datetime.timezone.utc)
        return (moment + datetime.timedelta(hours=1)).replace(tzinfo=None)

    clock = store_clock.StoreClock(server, sync_interval=60)
    first, second = clock(), clock()
    local = datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000
    assert abs(first - local - 3_600_000) < 1000
    assert second >= first and len(reads) == 1


def test_gc_drops_expired_messages_and_returns_lapsed_claims(driver, clock,
                                                            project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'short', ttl=10)
    post(driver, 'q', project, 'long', ttl=1000)
    claim(driver, 'q', project, limit=2, ttl=20, grace=0)
    clock.advance(31)
    assert driver.gc().expired == 1
    raw = driver.messages.raw
    assert raw.count_documents(fields.queue_filter('q', project)) == 1
    doc = raw.find_one(fields.queue_filter('q', project))
    assert doc['s'] == fields.READY and 'c' not in doc
    assert driver.claims.raw.count_documents({}) == 0


def test_gc_reads_the_queues_a_page_at_a_time(driver, clock, project,
                                              monkeypatch):
    """gc listed every queue's counter in one find, a request and a
    memory that grow with the queues tenants make; now COUNTER_PAGE (here
    2) a read, and every queue is still visited."""
    monkeypatch.setattr(mongodb_driver, 'COUNTER_PAGE', 2)
    names = ['q{}'.format(n) for n in range(5)]
    for name in names:
        driver.queue_controller.create(name, project=project)
        post(driver, name, project, 'short', ttl=10)
    clock.advance(11)
    pages = []
    find = driver.counters.find

    def counted(*args, **kwargs):
        found = find(*args, **kwargs)
        pages.append(len(found))
        return found

    monkeypatch.setattr(driver.counters, 'find', counted)
    assert driver.gc().expired == 5
    assert pages and max(pages) <= 2, pages
    assert driver.messages.raw.count_documents({fields.PROJECT: project}) \
        == 0


def test_health_reports_reachability(driver):
    assert driver.is_alive() is True
    health = driver._health()
    assert health['storage_reachable'] is True


def test_purge_removes_claims_and_messages_and_keeps_positions_a_day(
        driver, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')
    claim(driver, 'q', project, limit=1)
    stages.QueueStage(driver, None).delete('q', project=project)
    where = fields.queue_filter('q', project)
    for collection in (driver.messages, driver.claims):
        assert collection.raw.count_documents(where) == 0
    # The counter keeps the last position and the reservations of
    # writers at work (none here), until the TTL monitor removes it a
    # day later (messages.POSITIONS_KEPT_MS).
    [counter] = driver.counters.raw.find(where, {'_id': False})
    assert set(counter) == {'p', 'q', 'n', 'rv', 'x'}
    assert (counter['n'], counter['rv']) == (2, {})


def test_stats_after_claim_expiry_with_redelivery_delay(driver, clock,
                                                        project):
    driver.queue_controller.create(
        'q', metadata={'_redelivery_delay': 30}, project=project)
    post(driver, 'q', project, 'x')
    claim(driver, 'q', project, ttl=10, grace=0)
    clock.advance(11)
    counts = stats(driver, 'q', project)
    assert (counts['claimed'], counts['delayed'], counts['free']) == (0, 1, 0)
    clock.advance(30)
    counts = stats(driver, 'q', project)
    assert (counts['claimed'], counts['delayed'], counts['free']) == (0, 0, 1)


def test_the_health_report_counts_messages_as_zaqars_mongodb_driver(
        driver, make_queue, project):
    """GET /v2/health's message_volume, which Zaqar's MongoDB driver
    reports and its WSGI health suite asks for."""
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', 'c')
    claim(driver, queue, project, limit=1)
    assert driver._health()['message_volume'] == {
        'free': 2, 'claimed': 1, 'total': 3}


def test_a_queue_deletion_deletes_a_batch_of_messages_per_request(
        driver, project, monkeypatch):
    """It deleted every message of the queue in one request, however
    many there were."""
    monkeypatch.setattr(mongo_messages, 'PURGE_BATCH', 7)
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, *range(30))
    claim(driver, 'q', project, limit=5)
    deleted, delete_many = [], driver.messages.delete_many

    def counted(where, *args, **kwargs):
        result = delete_many(where, *args, **kwargs)
        deleted.append(result.deleted_count)
        return result

    monkeypatch.setattr(driver.messages, 'delete_many', counted)
    stages.QueueStage(driver, None).delete('q', project=project)
    assert sum(deleted) == 30 and max(deleted) <= 7, deleted
    assert driver.messages.raw.count_documents(
        fields.queue_filter('q', project)) == 0


@pytest.mark.parametrize('version', [[4, 0, 28, 0], [3, 6, 0, 0]])
def test_a_server_older_than_4_2_is_refused_before_anything_is_written(
        driver, project, monkeypatch, version):
    # Tried: the driver's first use of a database on MongoDB 4.0 and 3.6,
    # whose updates take no pipeline (every post's position reservation).
    info = dict(driver.connection.server_info(), versionArray=version)
    monkeypatch.setattr(driver.connection, 'server_info', lambda: info)
    with pytest.raises(errors.UnsupportedServer,
                       match=r'MongoDB {}\.{} is older than the 4\.2'.format(
                           *version[:2])):
        post(driver, 'q', project, 'never stored')
    database = driver.connection[driver.store_conf.database]
    assert database.list_collection_names() == []


@pytest.mark.parametrize('version, taken', [
    ([4, 1, 13, 0], False), ([4, 2, 0, 0], True), ([8, 0, 1, 0], True)])
def test_the_oldest_server_taken_is_4_2(version, taken):
    # The check alone: mongomock follows the version it reports, and takes
    # no update pipeline below 5.
    class Client:
        def server_info(self):
            return {'version': '.'.join(map(str, version)),
                    'versionArray': version}

    if taken:
        connection.check_server(Client())
    else:
        with pytest.raises(errors.UnsupportedServer, match='4.1 is older'):
            connection.check_server(Client())
