"""Zaqar's pooling builds every pool's driver from one shared configuration.

``dynamic_conf`` registers ``[drivers:message_store:<scheme>]`` from the
first pool's options (so our driver must tolerate options it did not
register) and overrides ``uri`` and the pool's options just before each
build. Each driver must keep the values it was built with, and a pool must
not inherit options that only an earlier pool set.
"""

import json

import pytest
import redis as redis_py
from zaqar.common import errors as zaqar_errors

from tests.contract.helpers import claim, post
from localstack import pooling_catalog as pooled
from localstack.pooling_catalog import delay_uri

REDIS_GROUP = 'drivers:message_store:delay.redis'


@pytest.fixture
def redis_pools(tmp_path, redis_url, second_redis_url):
    conf, control, catalog = pooled.make_catalog(tmp_path, 'delay.redis')
    control.pools_controller.create('a', 100, delay_uri(redis_url),
                                    options={'socket_timeout': 1.5,
                                             'max_reconnect_attempts': 1})
    control.pools_controller.create('b', 100, delay_uri(second_redis_url),
                                    options={})
    return conf, control, catalog


def storage(pipeline_driver):
    return pipeline_driver._storage


def test_each_redis_pool_keeps_its_own_uri_and_options(redis_pools,
                                                       redis_url,
                                                       second_redis_url):
    conf, _, catalog = redis_pools
    a = storage(catalog.get_driver('a'))
    b = storage(catalog.get_driver('b'))
    assert a.store_conf.uri == delay_uri(redis_url)
    assert (a.store_conf.socket_timeout,
            a.store_conf.max_reconnect_attempts) == (1.5, 1)
    assert b.store_conf.uri == delay_uri(second_redis_url)
    # Pool b names no options: it gets the defaults, not pool a's.
    assert (b.store_conf.socket_timeout,
            b.store_conf.max_reconnect_attempts) == (5.0, 3)
    a_port = a.connection.connection_pool.connection_kwargs['port']
    b_port = b.connection.connection_pool.connection_kwargs['port']
    assert (a_port, b_port) == (redis_py.Redis.from_url(redis_url)
                                .connection_pool.connection_kwargs['port'],
                                redis_py.Redis.from_url(second_redis_url)
                                .connection_pool.connection_kwargs['port'])
    # What zaqar.conf says is back once the pools are built.
    assert conf[REDIS_GROUP].socket_timeout == 5.0


def test_each_queue_is_stored_on_its_pools_redis(redis_pools, redis_url,
                                                 second_redis_url, project):
    _, control, catalog = redis_pools
    servers = {'a': redis_py.Redis.from_url(redis_url),
               'b': redis_py.Redis.from_url(second_redis_url)}
    for pool in ('a', 'b'):
        pooled.place(control, 'q-' + pool, project, pool,
                     {'_default_message_delay': 0,
                      '_message_group_key': 'g'})
    for pool in ('a', 'b'):
        post(catalog.lookup('q-' + pool, project), 'q-' + pool, project,
             {'g': 1, 'n': pool})
    for pool, other in (('a', 'b'), ('b', 'a')):
        tag = '{%s/q-%s}' % (project, pool)
        assert servers[pool].keys('*' + tag + '*')
        assert not servers[other].keys('*' + tag + '*')
        _, got = claim(catalog.lookup('q-' + pool, project), 'q-' + pool,
                       project)
        assert [m['body'] for m in got] == [{'g': 1, 'n': pool}]


def test_a_pool_option_out_of_bounds_is_refused_by_name(tmp_path, redis_url,
                                                        second_redis_url):
    conf, control, catalog = pooled.make_catalog(tmp_path, 'delay.redis')
    control.pools_controller.create('bad', 100, delay_uri(redis_url),
                                    options={'socket_timeout': 0.01})
    control.pools_controller.create('good', 100,
                                    delay_uri(second_redis_url),
                                    options={})
    with pytest.raises(zaqar_errors.InvalidDriver) as raised:
        catalog.get_driver('bad')
    text = str(raised.value)
    assert 'socket_timeout' in text and '0.01' in text and '0.1' in text
    # The refused pool's values do not leak into the next pool's driver.
    assert storage(catalog.get_driver('good')).store_conf.socket_timeout \
        == 5.0


def test_each_mongodb_pool_keeps_its_own_server_and_database(
        tmp_path, project, monkeypatch):
    # mongomock cannot be shared across processes, so MongoDB pooling is
    # tested here, in Zaqar's catalogue, with one mongomock per pool URI.
    import mongomock
    from localstack.factories import mongodb as mongodb_factory
    from zaqar_delay.drivers.mongodb import driver as mongodb_driver
    mongodb_factory.adapt_mongomock()
    servers = {}

    def client_for(uri, **options):
        # Keyed by host: the driver hands pymongo a mongodb:// URI.
        host = uri.split('://', 1)[1]
        return servers.setdefault(host, mongomock.MongoClient())

    monkeypatch.setattr(mongodb_driver.DataDriver, 'client_factory',
                        staticmethod(client_for))
    _, control, catalog = pooled.make_catalog(tmp_path, 'delay.mongodb')
    uris = {'a': 'delay.mongodb://db-a.example.org:27017',
            'b': 'delay.mongodb://db-b.example.org:27017'}
    control.pools_controller.create('a', 100, uris['a'],
                                    options={'database': 'zd_a',
                                             'max_body_size': 4096})
    control.pools_controller.create('b', 100, uris['b'], options={})
    for pool in ('a', 'b'):
        pooled.place(control, 'q-' + pool, project, pool)
        post(catalog.lookup('q-' + pool, project), 'q-' + pool, project,
             {'n': pool})
    a = storage(catalog.get_driver('a'))
    b = storage(catalog.get_driver('b'))
    assert (a.store_conf.database, a.store_conf.max_body_size) == (
        'zd_a', 4096)
    assert (b.store_conf.database, b.store_conf.max_body_size) == (
        'zaqar_delay', 1024 * 1024)
    found = {}
    for pool, database in (('a', 'zd_a'), ('b', 'zaqar_delay')):
        server = servers[uris[pool].split('://', 1)[1]]
        found[pool] = [json.loads(d['b'])
                       for d in server[database]['messages'].find({})]
    assert found == {'a': [{'n': 'a'}], 'b': [{'n': 'b'}]}


def test_each_swift_pool_keeps_its_own_account(tmp_path, project,
                                               swift_server):
    # Two tempauth accounts of the one test Swift are two pools.
    from localstack.factories import swift as swift_factory
    from zaqar_delay.drivers.swift import names
    _, control, catalog = pooled.make_catalog(tmp_path, 'delay.swift')
    uris = {'a': swift_factory.swift_uri(swift_server),
            'b': swift_factory.swift_uri(swift_server, 'test2:tester2',
                                         'testing2')}
    control.pools_controller.create('a', 100, uris['a'],
                                    options={'timeout': 20.0})
    control.pools_controller.create('b', 100, uris['b'], options={})
    for pool in ('a', 'b'):
        pooled.place(control, 'q-' + pool, project, pool)
        post(catalog.lookup('q-' + pool, project), 'q-' + pool, project,
             {'n': pool})
    drivers = {pool: storage(catalog.get_driver(pool)) for pool in uris}
    assert drivers['a'].store_conf.timeout == 20.0
    assert drivers['b'].store_conf.timeout == 10.0
    for pool, other in (('a', 'b'), ('b', 'a')):
        assert drivers[pool].store_conf.uri == uris[pool]
        container = names.container(names.MESSAGES, 'q-' + pool, project)
        assert container in drivers[pool].store.containers(container)
        assert container not in drivers[other].store.containers(container)


def dead_letter_one(driver, project):
    post(driver, 'feed', project, 'x')
    claim_id, _ = claim(driver, 'feed', project)
    driver.claim_controller.delete('feed', claim_id, project)
    assert claim(driver, 'feed', project)[1] == []


def test_a_dead_letter_queue_is_filed_under_its_feeders_pool(
        redis_pools, project, caplog):
    _, control, catalog = redis_pools
    pooled.place(control, 'feed', project, 'b',
                 {'_max_claim_count': 1, '_dead_letter_queue': 'dlq'})
    dead_letter_one(catalog.lookup('feed', project), project)
    assert control.catalogue_controller.get(project, 'dlq')['pool'] == 'b'
    _, got = claim(catalog.lookup('dlq', project), 'dlq', project)
    assert [m['body'] for m in got] == ['x']
    assert 'where Zaqar will not find them' not in caplog.text


def test_a_dead_letter_queue_on_another_pool_is_logged(redis_pools,
                                                       project, caplog):
    _, control, catalog = redis_pools
    pooled.place(control, 'feed', project, 'a',
                 {'_max_claim_count': 1, '_dead_letter_queue': 'dlq'})
    pooled.place(control, 'dlq', project, 'b')
    dead_letter_one(catalog.lookup('feed', project), project)
    assert ("queue 'dlq' of project %r is on pool 'b', but messages for it "
            "(dead letters, a moved group) are stored in pool 'a'"
            % project) in caplog.text


def test_pool_options_are_taken_as_registered(tmp_path, redis_url,
                                              second_redis_url):
    # The first pool makes Zaqar type socket_timeout as an integer option;
    # the second pool's 2.5 must not become 2.
    _, control, catalog = pooled.make_catalog(tmp_path, 'delay.redis')
    control.pools_controller.create('a', 100, delay_uri(redis_url),
                                    options={'socket_timeout': 2})
    control.pools_controller.create('b', 100, delay_uri(second_redis_url),
                                    options={'socket_timeout': 2.5})
    assert storage(catalog.get_driver('a')).store_conf.socket_timeout == 2.0
    assert storage(catalog.get_driver('b')).store_conf.socket_timeout == 2.5


def test_a_pool_refused_halfway_leaves_nothing_to_the_next(
        tmp_path, redis_url, second_redis_url):
    # With our options registered, Zaqar's dynamic_conf itself refuses the
    # bad value, after overriding the options before it in the pool's
    # options: the next pool built must not inherit those.
    _, control, catalog = pooled.make_catalog(tmp_path, 'delay.redis')
    control.pools_controller.create('a', 100, delay_uri(redis_url))
    control.pools_controller.create(
        'bad', 100, 'delay.redis://127.0.0.1:1/0',
        options={'max_reconnect_attempts': 1, 'socket_timeout': 0.01})
    control.pools_controller.create('b', 100, delay_uri(second_redis_url))
    catalog.get_driver('a')
    with pytest.raises(ValueError, match='greater than or equal to 0.1'):
        catalog.get_driver('bad')
    b = storage(catalog.get_driver('b')).store_conf
    assert (b.uri, b.max_reconnect_attempts) == (
        delay_uri(second_redis_url), 3)
