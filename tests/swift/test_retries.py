"""Swift: gc finishing a dead-letter copy a dead node left midway cannot
bring back a copy its consumer deleted (r/ markers, names.py)."""

import pytest

from tests.contract.helpers import bodies, claim, listed, post
from zaqar_delay.drivers.swift import names


def dead_letter(driver, queue, project, clock):
    claim(driver, queue, project, ttl=60)
    clock.advance(60)
    assert claim(driver, queue, project) == (None, [])


def test_gc_does_not_copy_again_a_dead_letter_its_consumer_deleted(
        driver, make_queue, project, clock, monkeypatch):
    dlq = make_queue()
    queue = make_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    post(driver, queue, project, 'poison', ttl=3600)
    messages = driver.message_controller
    original = messages._insert

    def copies_then_dies(*args, **kwargs):
        original(*args, **kwargs)
        raise SystemExit('node died after copying')

    monkeypatch.setattr(messages, '_insert', copies_then_dies)
    with pytest.raises(SystemExit):
        dead_letter(driver, queue, project, clock)
    monkeypatch.undo()
    assert bodies(messages.pop(dlq, 10, project=project)) == ['poison']
    clock.advance(600)
    # gc of the one queue (driver.gc() walks every queue of the session).
    driver._gc_queue(names.container(names.MESSAGES, queue, project))
    assert listed(driver, dlq, project, include_claimed=True) == []
    assert listed(driver, queue, project, include_claimed=True) == []


def test_a_dead_letter_moved_back_can_be_dead_lettered_again(
        driver, make_queue, project, clock):
    grouped = {'_message_group_key': 'g'}
    dlq = make_queue(grouped)
    queue = make_queue(dict(grouped, _max_claim_count=1,
                            _dead_letter_queue=dlq))
    post(driver, queue, project, {'g': 'a'}, ttl=3600)
    dead_letter(driver, queue, project, clock)
    assert driver.message_controller.move_group(dlq, 'a', queue,
                                                project=project) == 1
    dead_letter(driver, queue, project, clock)
    assert bodies(listed(driver, dlq, project)) == [{'g': 'a'}]


def test_an_unreachable_swift_is_a_storage_error(request, conf, project):
    # Zaqar turns a storage ConnectionError into a 503; anything else (a
    # TypeError from building one wrongly) would be a 500 with a trace.
    from zaqar.storage import errors as storage_errors
    from localstack import backends
    from localstack.factories import swift as swift_factory
    from localstack.redis_server import free_port
    from zaqar_delay.drivers.swift import driver as swift_driver
    server = request.getfixturevalue('swift_server')
    uri = swift_factory.swift_uri(server).replace(
        ':{}/'.format(server.proxy_port), ':{}/'.format(free_port()))
    conf.set_override('uri', uri, group=swift_factory.GROUP)
    control = backends.control_driver(conf,
                                      request.getfixturevalue('redis_url'))
    unreachable = swift_driver.DataDriver(conf, None, control)
    unreachable.queue_controller.create('q', project=project)
    with pytest.raises(storage_errors.ConnectionError, match='Swift'):
        post(unreachable, 'q', project, 'lost?')


@pytest.fixture
def reply_losing_driver(conf, swift_server, redis_url):
    """A Swift driver whose requests go through localstack/http_proxy
    (the test Swift behind a proxy that can lose a reply)."""
    from localstack import backends
    from localstack.factories import swift as swift_factory
    from localstack import http_proxy
    from zaqar_delay.drivers.swift import driver as swift_driver
    proxy = http_proxy.HttpProxy(swift_server.proxy_port).start()
    uri = swift_factory.swift_uri(swift_server).replace(
        ':{}/'.format(swift_server.proxy_port), ':{}/'.format(proxy.port))
    conf.set_override('uri', uri, group=swift_factory.GROUP)
    driver = swift_driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url))
    yield driver, proxy
    driver.close()
    proxy.stop()


def test_a_post_whose_message_put_lost_its_reply_is_retried_once(
        reply_losing_driver, project):
    # swiftclient does not send a bytes body again: the driver gives it
    # one it can rewind, so the PUT is retried (and its 412, the first
    # attempt having landed, is read back as its own).
    driver, proxy = reply_losing_driver
    driver.queue_controller.create('q', project=project)
    proxy.lose_reply_of(lambda method, path: method == 'PUT'
                        and '/' + names.message_obj('') in path)
    post(driver, 'q', project, 'a')
    assert [(method, status) for method, _, status in proxy.lost] == [
        ('PUT', 201)]
    assert bodies(listed(driver, 'q', project, include_claimed=True)) == [
        'a']
    assert bodies(driver.message_controller.pop('q', 10,
                                                project=project)) == ['a']
