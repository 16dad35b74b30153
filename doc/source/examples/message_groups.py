"""Message groups: one cart's messages in order, one at a time; carts
never wait for each other.

    python message_groups.py http://zaqar.example.org:8888 PROJECT
"""

import sys

from zaqarclient.queues import client as zaqar_client


def main(url, project):
    client = zaqar_client.Client(url, version=2, conf={
        'auth_opts': {'backend': 'noauth',
                      'options': {'os_project_id': project}}})
    queue = client.queue('carts', force_create=True)
    queue.metadata(new_meta={'_message_group_key': 'cart'})
    queue.post([{'ttl': 300, 'body': {'cart': 'c1', 'op': 'add'}},
                {'ttl': 300, 'body': {'cart': 'c1', 'op': 'remove'}},
                {'ttl': 300, 'body': {'cart': 'c2', 'op': 'add'}}])
    handed = []
    for _ in range(2):
        # At most one message per cart: c1's "remove" waits for its "add".
        claimed = list(queue.claim(ttl=60, grace=60, limit=10))
        handed.append([message.body for message in claimed])
        print('claimed:', handed[-1])
        for message in claimed:
            message.delete()        # acknowledged: the next one is due
    return handed


if __name__ == '__main__':
    main(*sys.argv[1:])
