"""A delayed queue: every message waits 60 s unless it says otherwise.

    python delayed_queue.py http://zaqar.example.org:8888 PROJECT
"""

import sys

from zaqarclient.queues import client as zaqar_client


def main(url, project):
    client = zaqar_client.Client(url, version=2, conf={
        'auth_opts': {'backend': 'noauth',
                      'options': {'os_project_id': project}}})
    queue = client.queue('orders', force_create=True)
    queue.metadata(new_meta={'_default_message_delay': 60})
    queue.post([{'ttl': 300, 'body': {'order': 1}},             # in 60 s
                {'ttl': 300, 'body': {'order': 2}, 'delay': 0},  # now
                {'ttl': 900, 'body': {'order': 3}, 'delay': 600}])
    claimed = [message.body for message in
               queue.claim(ttl=60, grace=60, limit=10)]
    counts = queue.stats['messages']
    print('claimed now:', claimed)              # only order 2
    print('stats:', counts)                     # 2 delayed, 1 claimed
    return claimed, counts


if __name__ == '__main__':
    main(*sys.argv[1:])
