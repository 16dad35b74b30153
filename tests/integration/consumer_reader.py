"""A persistent consumer as an application writes it with
python-zaqarclient (run by test_consumers_rest.py in its own process):

    python -m tests.integration.consumer_reader URL PROJECT QUEUE CLIENT_ID
        OUT PAGE [STOP_AFTER]

Walks the queue's messages with its Client-ID, ``PAGE`` at a time, without
a marker: Zaqar resumes it after its stored cursor, and each next page it
fetches (the ``next`` link's marker) acknowledges the one before. Appends
each body to ``OUT`` as it reads it; after ``STOP_AFTER`` bodies it
blocks, for the test to kill it mid-page; without, it exits at the end.
"""

import sys
import time

from zaqarclient.queues import client as zaqar_client


def main(url, project, queue, client_id, out, page, stop_after=None):
    client = zaqar_client.Client(url, version=2, conf={
        'client_uuid': client_id,
        'auth_opts': {'backend': 'noauth',
                      'options': {'os_project_id': project}}})
    read = 0
    with open(out, 'a') as sink:
        for message in client.queue(queue, auto_create=False).messages(
                limit=int(page)).stream():
            sink.write('{}\n'.format(message.body))
            sink.flush()
            read += 1
            if stop_after is not None and read >= int(stop_after):
                while True:
                    time.sleep(60)


if __name__ == '__main__':
    main(*sys.argv[1:])
