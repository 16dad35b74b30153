"""Small helpers shared by the contract tests."""

import importlib
import time
import uuid

from zaqar_delay import rules

CLIENT = uuid.UUID('11111111-1111-4111-8111-111111111111')
OTHER_CLIENT = uuid.UUID('22222222-2222-4222-8222-222222222222')
CLAIM = {'ttl': 600, 'grace': 30}


def post(driver, queue, project, *bodies, ttl=300, client=CLIENT, **extra):
    messages = [dict({'ttl': ttl, 'body': body}, **extra) for body in bodies]
    return driver.message_controller.post(queue, messages, client,
                                          project=project)


def listed(driver, queue, project, **kwargs):
    """Every message a listing returns, following markers to the end."""
    kwargs.setdefault('echo', True)
    out, marker = [], None
    for _ in range(1000):
        pages = driver.message_controller.list(queue, project=project,
                                               marker=marker, **kwargs)
        page = list(next(pages))
        marker = next(pages)
        if not page:
            return out
        out.extend(page)
    raise AssertionError('listing never ended')


def bodies(messages):
    return [message['body'] for message in messages]


def claim(driver, queue, project, limit=10, **meta):
    claim_id, messages = driver.claim_controller.create(
        queue, dict(CLAIM, **meta), project=project, limit=limit)
    return claim_id, list(messages)


def claimed_bodies(driver, queue, project, limit=10):
    return bodies(claim(driver, queue, project, limit)[1])


def zaqar_purge(driver, queue, project, client_bound=20):
    """What Zaqar's POST /v2/queues/{name}/purge does with messages
    (zaqar/transport/wsgi/v2_0/purge.py): pop 100 until a pop comes back
    empty. Under Zaqar's default bound on a client's pop (20) those are
    more than a client may pop, so the controller knows Zaqar's purge;
    with a bound of 100 or more they are ordinary pops."""
    driver.conf.set_override('max_messages_per_claim_or_pop', client_bound,
                             group='transport')
    popped = []
    while True:
        got = driver.message_controller.pop(queue, 100, project=project)
        if not got:
            return popped
        popped.extend(got)


def stats(driver, queue, project):
    return driver.message_controller.stats(queue, project)['messages']


def check_an_api_clock_ahead_hands_out_nothing_early(driver, project,
                                                     monkeypatch):
    """SPEC §7 for a store with a clock of its own (Redis, MongoDB): this
    process's wall clock jumps an hour ahead, as on an API node with a
    skewed clock; the store's does not, so a delayed message stays
    delayed."""
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 30}, project=project)
    post(driver, 'q', project, 'in 30 s')
    post(driver, 'q', project, 'now', delay=0)
    real_time = time.time
    monkeypatch.setattr(time, 'time', lambda: real_time() + 3600)
    assert [m['body'] for m in claim(driver, 'q', project)[1]] == ['now']
    assert claim(driver, 'q', project) == (None, [])
    assert [m['body'] for m in listed(driver, 'q', project,
                                      include_delayed=True)] == ['in 30 s']


def moved(driver, queue, project, *names, ttl=300, age_ms=0):
    """``names`` as zaqar-delay-migrate hands them to ``carry_in``."""
    return [message._replace(age_ms=age_ms)
            for message in rules.prepare_messages(
                [{'body': name, 'ttl': ttl} for name in names],
                driver.message_controller.policy(queue, project), 0,
                1209600)]


def raise_layout_version(driver):
    """What an upgrade to a later layout does last, on each backend: the
    store's version one above this driver's. Returns what puts it back."""
    layout = layout_module(driver)
    write_layout_version(driver, layout.CURRENT + 1)
    return lambda: write_layout_version(driver, layout.CURRENT)


def layout_module(driver):
    """The backend's ``layout`` module: its CURRENT is the version this
    code reads (a test raises it to play a later release)."""
    backend = type(driver).__module__.split('.')[-2]
    return importlib.import_module(
        'zaqar_delay.drivers.{}.layout'.format(backend))


def write_layout_version(driver, number):
    """Overwrite the store's layout version (``None``: remove it, as in a
    store written before versions existed), reaching it without the
    driver's own check."""
    layout = layout_module(driver)
    module = type(driver).__module__
    if module.endswith('swift.driver'):
        from zaqar_delay.drivers.swift import names
        if number is None:
            driver.store.delete(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ)
        else:
            layout.write(driver.store, number)
    elif module.endswith('redis.driver'):
        if number is None:
            driver.connection.delete(layout.LAYOUT_KEY)
        else:
            driver.connection.set(layout.LAYOUT_KEY, number)
    else:
        from zaqar_delay.drivers.mongodb import fields
        database = driver.connection[driver.store_conf.database]
        if number is None:
            database[fields.LAYOUT].delete_one({'_id': fields.LAYOUT_ID})
        else:
            layout.write(database, number)


def another_node(driver):
    """A second driver on the same store and configuration, as another
    API node would open it (its own first use, its own version check)."""
    extra = {}
    if hasattr(driver, '_client_factory'):
        extra['client_factory'] = driver._client_factory
    return type(driver)(driver.conf, None, driver.control_driver, **extra)


def around_queue_gc(driver, monkeypatch, around):
    """Send each queue's gc step, the way each backend settles one,
    through ``around(key, step)``: ``key`` is the Swift container, else
    ``(queue, project)``; ``step()`` runs the real one."""
    if type(driver).__module__.endswith('swift.driver'):
        original = driver._gc_queue
        monkeypatch.setattr(driver, '_gc_queue', lambda container, *rest: (
            around(container, lambda: original(container, *rest))))
    else:
        original = driver.message_controller.gc
        monkeypatch.setattr(
            driver.message_controller, 'gc', lambda queue, project, *rest: (
                around((queue, project),
                       lambda: original(queue, project, *rest))))
