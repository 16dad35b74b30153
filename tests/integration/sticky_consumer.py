"""A sticky consumer (run by test_sticky_rest.py in its own process):

    python -m tests.integration.sticky_consumer URL PROJECT QUEUE CLIENT_ID OUT

Claims one message at a time over Zaqar's REST API with its Client-ID,
deletes it, then appends ``<group> <n> <message id>`` to ``OUT``. On
SIGTERM it finishes the message in hand and exits, so that it leaves no
claimed message behind to be handed out twice.
"""

import signal
import sys
import time

import requests

STOPPING = []


def main(url, project, queue, client_id, out):
    signal.signal(signal.SIGTERM, lambda *_: STOPPING.append(True))
    session = requests.Session()
    session.headers.update({'X-Project-ID': project, 'Client-ID': client_id})
    base = url + '/v2/queues/' + queue
    with open(out, 'a') as sink:
        while not STOPPING:
            reply = session.post(base + '/claims', params={'limit': 1},
                                 json={'ttl': 60, 'grace': 60}, timeout=30)
            if reply.status_code == 204:
                time.sleep(0.05)
                continue
            reply.raise_for_status()
            for message in reply.json()['messages']:
                deleted = session.delete(url + message['href'], timeout=30)
                deleted.raise_for_status()
                body = message['body']
                sink.write('{} {} {}\n'.format(body['g'], body['n'],
                                               message['href']))
                sink.flush()


if __name__ == '__main__':
    main(*sys.argv[1:])
