"""Retention: a tenant keeps only the 3 newest messages of a queue.

    python retention.py http://zaqar.example.org:8888 PROJECT
"""

import sys

from zaqarclient.queues import client as zaqar_client


def main(url, project):
    client = zaqar_client.Client(url, version=2, conf={
        'auth_opts': {'backend': 'noauth',
                      'options': {'os_project_id': project}}})
    queue = client.queue('readings', force_create=True)
    # A tenant may tighten what the operator's [retention] keeps, never
    # loosen it.
    queue.metadata(new_meta={'_retention': {'length': 3}})
    queue.post([{'ttl': 300, 'body': {'reading': n}} for n in range(5)])
    kept = [message.body['reading'] for message in
            queue.messages(echo=True)]
    print('kept:', kept)                        # the 3 newest
    print('retention:', queue.stats['retention'])
    return kept, queue.stats['retention']


if __name__ == '__main__':
    main(*sys.argv[1:])
