"""A local Zaqar on the zaqar-delay Redis driver, and a short tour of it:
delayed delivery, bad input, message groups and dead-lettering,
retention (the operator's bound, a tenant tightening it, the cleanup
daemon), a persistent consumer resuming after a disconnect; then the
delayed-event worker library (zaqar_delay.worker) on the same Zaqar.

Starts its own redis-server and ``zaqar-server`` on free loopback ports,
then talks to Zaqar's unchanged v2 REST API as any client would.
"""

import argparse
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import uuid

import requests

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from localstack.redis_server import RedisServer  # noqa: E402
from localstack.zaqar_server import ZaqarServer  # noqa: E402
from zaqar_delay import worker  # noqa: E402


# Persistent consumers register with a cursor:<Client-ID> subscriber; the
# operator keeps the "audit" queue's messages 4 s at most.
DEMO_OPERATOR_CONFIG = """
[transport]
subscriber_types = http,https,mailto,trust+http,trust+https,cursor

[retention:audit]
time = 4
"""


class Api:
    def __init__(self, url):
        self.base = url + '/v2/queues/'
        self.headers = {'Client-ID': str(uuid.uuid4()),
                        'X-Project-ID': 'demo'}

    def __call__(self, method, path, **kwargs):
        reply = requests.request(method, self.base + path, timeout=10,
                                 headers=self.headers, **kwargs)
        if reply.status_code >= 300 and reply.status_code != 204:
            raise SystemExit('{} {} -> {} {}'.format(
                method, path, reply.status_code, reply.text))
        return reply.json() if reply.content else None


def show(title):
    print('\n== ' + title)


def bodies(messages):
    return [m['body'] for m in messages]


def tour(api):
    show('A delayed queue: every message waits 3 s unless it says otherwise')
    api('PUT', 'orders', json={'_default_message_delay': 3})
    api('POST', 'orders/messages', json={'messages': [
        {'ttl': 300, 'body': {'order': 1, 'note': 'queue default delay'}},
        {'ttl': 300, 'body': {'order': 2, 'note': 'delay 0'}, 'delay': 0},
        {'ttl': 300, 'body': {'order': 3, 'note': 'delay 6'}, 'delay': 6},
    ]})
    print('visible now:      ', bodies(api('GET', 'orders/messages',
                                           params={'echo': 'true'})
                                       ['messages']))
    print('with delayed:     ', bodies(api('GET', 'orders/messages', params={
        'echo': 'true', 'include_delayed': 'true'})['messages']))
    print('stats:            ', api('GET', 'orders/stats')['messages'])
    claim = api('POST', 'orders/claims', json={'ttl': 60, 'grace': 60})
    print('claim now:        ', bodies(claim['messages']))
    time.sleep(3.2)
    claim = api('POST', 'orders/claims', json={'ttl': 60, 'grace': 60})
    print('claim after 3 s:  ', bodies(claim['messages']))
    time.sleep(3)
    claim = api('POST', 'orders/claims', json={'ttl': 60, 'grace': 60})
    print('claim after 6 s:  ', bodies(claim['messages']))

    show('Bad input is refused, and nothing is stored')
    reply = requests.post(api.base + 'orders/messages', headers=api.headers,
                          json={'messages': [{'ttl': 300, 'body': 'x',
                                              'delay': True}]}, timeout=10)
    print('delay=true ->', reply.status_code, reply.json()['description'])

    show('Message groups: one message per cart at a time, in order')
    api('PUT', 'carts', json={'_message_group_key': 'cart'})
    api('POST', 'carts/messages', json={'messages': [
        {'ttl': 300, 'body': {'cart': 'c1', 'op': 'add apples'}},
        {'ttl': 300, 'body': {'cart': 'c1', 'op': 'remove apples'}},
        {'ttl': 300, 'body': {'cart': 'c2', 'op': 'add pears'}},
        {'ttl': 300, 'body': {'note': 'no cart: never blocked'}},
    ]})
    first = api('POST', 'carts/claims', params={'limit': 10},
                json={'ttl': 60, 'grace': 60})
    print('consumer A claims:', bodies(first['messages']))
    print('consumer B claims:', api('POST', 'carts/claims', json={
        'ttl': 60, 'grace': 60}), '(c1 waits for its first message)')
    stats = api('GET', 'carts/stats')['messages']
    print('stats:             groups={groups} in flight={groups_in_flight}'
          .format(**stats))
    api('DELETE', first['messages'][0]['href'].split('/queues/', 1)[1])
    print('A deletes', first['messages'][0]['body'], '-> B claims:',
          bodies(api('POST', 'carts/claims', json={
              'ttl': 60, 'grace': 60})['messages']))

    show('Bounded redelivery: 2 attempts, then the dead-letter queue')
    api('PUT', 'dead', json={})
    api('PUT', 'jobs', json={'_max_claim_count': 2,
                             '_dead_letter_queue': 'dead'})
    api('POST', 'jobs/messages', json={'messages': [
        {'ttl': 300, 'body': 'poison pill'}]})
    for attempt in (1, 2):
        claim = api('POST', 'jobs/claims', json={'ttl': 60, 'grace': 60})
        claim_id = claim['messages'][0]['href'].split('claim_id=')[1]
        print('attempt', attempt, 'got', bodies(claim['messages']),
              '- consumer gives up (releases the claim)')
        api('DELETE', 'jobs/claims/' + claim_id)
    print('attempt 3 gets:   ', api('POST', 'jobs/claims', json={
        'ttl': 60, 'grace': 60}))
    print('dead-letter queue:', bodies(api('GET', 'dead/messages', params={
        'echo': 'true'})['messages']))


def retention_tour(api, zaqar):
    show('Retention: the operator bounds a queue, a tenant may only tighten')
    reply = requests.put(api.base + 'audit', headers=api.headers, timeout=10,
                         json={'_retention': {'time': 60}})
    print('audit _retention time 60 ->', reply.status_code,
          reply.json()['description'])
    api('PUT', 'audit', json={'_retention': {'length': 3}})
    api('POST', 'audit/messages', json={'messages': [
        {'ttl': 300, 'body': 'event %d' % n} for n in range(5)]})
    print('5 posted, length 3: ', bodies(api('GET', 'audit/messages', params={
        'echo': 'true'})['messages']))
    time.sleep(4.2)
    print('after 4 s (time 4): ', api('GET', 'audit/messages', params={
        'echo': 'true'})['messages'])
    # Its log (osprofiler's complaint about oslo.messaging included) goes
    # to stderr, shown only if the pass fails.
    gc = subprocess.run([os.path.join(os.path.dirname(sys.executable),
                                      'zaqar-delay-gc'), '--once', '--verbose',
                         '--config-file', zaqar.config],
                        capture_output=True, text=True)
    if gc.returncode:
        raise SystemExit('zaqar-delay-gc failed:\n' + gc.stderr)
    print('zaqar-delay-gc:     ', gc.stdout.strip())
    stats = api('GET', 'audit/stats')
    print('stats:               total={} retention={}'.format(
        stats['messages']['total'], stats['retention']))


def next_marker(page):
    """The marker of a listing's ``next`` link: it acknowledges the page."""
    for link in page['links']:
        if link['rel'] == 'next':
            query = urllib.parse.urlparse(link['href']).query
            return urllib.parse.parse_qs(query)['marker'][0]


def consumer_tour(api, url):
    show('A persistent consumer: a stored cursor, resumed after a disconnect')
    reader = Api(url)
    consume_id = reader.headers['Client-ID']
    api('PUT', 'feed', json={})
    subscription = api('POST', 'feed/subscriptions', json={
        'subscriber': 'cursor:' + consume_id, 'ttl': 3600})
    api('POST', 'feed/messages', json={'messages': [
        {'ttl': 300, 'body': n} for n in range(7)]})
    page = reader('GET', 'feed/messages', params={'limit': 3})
    print('reads:              ', bodies(page['messages']))
    first = next_marker(page)
    page = reader('GET', 'feed/messages', params={'limit': 3,
                                                  'marker': first})
    print('acknowledges, reads:', bodies(page['messages']),
          '(then disconnects before acknowledging them)')
    again = Api(url)
    again.headers['Client-ID'] = consume_id
    page = again('GET', 'feed/messages', params={'limit': 3})
    print('resumes (no marker):', bodies(page['messages']))
    reply = requests.get(again.base + 'feed/messages', headers=again.headers,
                         params={'marker': int(first) - 1}, timeout=10)
    print('rewind ->', reply.status_code, reply.json()['description'])
    page = again('GET', 'feed/messages', params={'limit': 3,
                                                 'marker': next_marker(page)})
    print('acknowledges, reads:', bodies(page['messages']))
    shown = api('GET', 'feed/subscriptions/' + subscription['subscription_id'])
    print('subscription options:', shown['options'])


@dataclasses.dataclass
class PaymentCheck:
    order: int


def worker_tour(url):
    show('Delayed-event worker: a delayed event, a retried failure, a dead '
         'letter')
    # The handlers below print their failures; keep the tracebacks out.
    logging.getLogger('zaqar_delay.worker').setLevel(logging.CRITICAL)
    app = worker.App(url, project='demo', prefix='demo-',
                     settings=worker.Settings(poll_interval=0.2,
                                              retry_delay=1, max_attempts=2))
    started = time.monotonic()

    def check(event):
        print('  {:4.1f} s  PaymentCheck order={} context={}'.format(
            time.monotonic() - started, event.order,
            dict(worker.event_context())))

    def refund(event):
        print('  {:4.1f} s  Refund {} fails (refund service down)'.format(
            time.monotonic() - started, event))
        raise RuntimeError('refund service down')

    app.add_handler(PaymentCheck, check, parallelism=2)
    app.add_handler('Refund', refund)
    app.start()
    try:
        app.enqueue(PaymentCheck(order=42), delay=3,
                    context={'trace': 'a1b2'})
        app.enqueue({'order': 7}, type='Refund')
        print('enqueued PaymentCheck (delay 3 s) and Refund (due now, 2 '
              'attempts, 1 s apart)')
        deadline = time.monotonic() + 15
        while (time.monotonic() < deadline
               and not (app.dead_letters('Refund')
                        and app.counts.snapshot('PaymentCheck').get(
                            'handled'))):
            time.sleep(0.2)
        for letter in app.dead_letters('Refund'):
            print('dead letter:', letter.type, letter.data, 'after',
                  letter.attempts, 'attempts')
        app.refresh_stats()
        print('progress:   ', app.progress())
    finally:
        app.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--serve', action='store_true',
                        help='keep Zaqar running after the demo')
    args = parser.parse_args()
    if args.serve:
        # Ctrl-C (SIGINT) ends the serving, also when the demo was started
        # with SIGINT ignored, as a shell starts a background job.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    with RedisServer() as redis:
        zaqar = ZaqarServer(redis.url, 'delay.redis', {
            'uri': redis.url.replace('redis://', 'delay.redis://')},
            extra=DEMO_OPERATOR_CONFIG).start()
        try:
            print('Zaqar (message_store = delay.redis) at', zaqar.url)
            print('its zaqar.conf:', zaqar.config)
            tour(Api(zaqar.url))
            retention_tour(Api(zaqar.url), zaqar)
            consumer_tour(Api(zaqar.url), zaqar.url)
            worker_tour(zaqar.url)
            if args.serve:
                print('\nServing at {} (project header X-Project-ID); '
                      'Ctrl-C stops.'.format(zaqar.url))
                while True:
                    time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            zaqar.stop()


if __name__ == '__main__':
    main()
