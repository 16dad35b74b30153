"""A persistent consumer: its cursor is kept by the server, so it resumes
where it stopped, after a restart too.

    python persistent_consumer.py http://zaqar.example.org:8888 PROJECT
"""

import sys
import uuid

from zaqarclient.queues import client as zaqar_client


def connect(url, project, consume_id=None):
    conf = {'auth_opts': {'backend': 'noauth',
                          'options': {'os_project_id': project}}}
    if consume_id:
        conf['client_uuid'] = consume_id
    return zaqar_client.Client(url, version=2, conf=conf)


def main(url, project):
    consume_id = str(uuid.uuid4())
    producer = connect(url, project)
    queue = producer.queue('audit', force_create=True)
    # The subscriber cursor:<consume_id> makes it a persistent consumer.
    producer.subscription('audit', subscriber='cursor:' + consume_id,
                          ttl=3600)
    queue.post([{'ttl': 300, 'body': {'event': n}} for n in range(5)])

    # The consumer lists with its consume_id as Client-ID, 3 at a time.
    # Fetching a page (the next link's marker) acknowledges the one
    # before: reading message 3 acknowledges 0, 1 and 2.
    pages = connect(url, project, consume_id).queue('audit').messages(
        limit=3).stream()
    read = [next(pages).body['event'] for _ in range(4)]
    # It stops there. The same consume_id, in a new process, resumes after
    # its cursor: the page holding 3 was not acknowledged, so 3 comes again.
    again = connect(url, project, consume_id).queue('audit').messages(
        limit=10)
    rest = [message.body['event'] for message in again]
    print('read first:', read, 'then, resumed:', rest)
    return read, rest


if __name__ == '__main__':
    main(*sys.argv[1:])
