"""The README's first command runs tools/demo.py: what it shows must hold.

Each assertion is a line the demo prints about one behaviour (delay,
groups, dead letters, retention with the cleanup daemon, a persistent
consumer, the worker library), so a regression in any of them fails here
rather than in front of a reader.
"""

import os
import queue
import signal
import subprocess
import sys
import threading
import uuid

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVING = 'Serving at '


def stop(demo):
    """End a demo a failed check left running: SIGINT first, so that it
    stops its zaqar-server and redis-server; if it does not end, SIGKILL
    for it and SIGTERM for those two, by their PIDs."""
    if demo.poll() is None:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            servers = children(demo.pid)
            demo.kill()
            demo.wait()
            for pid in servers:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass


def children(pid):
    """The PIDs of the processes ``pid`` started (Linux /proc)."""
    try:
        with open('/proc/{0}/task/{0}/children'.format(pid)) as listing:
            return [int(child) for child in listing.read().split()]
    except OSError:
        return []


def serve_demo(stderr):
    """Run ``tools/demo.py --serve`` (README: ``scripts/demo.sh --serve``)
    until it says it is serving; returns (the process, what it printed
    until then, Zaqar's URL)."""
    # Started with SIGINT ignored, as a shell starts a background job
    # (`scripts/demo.sh --serve &`): Ctrl-C must still stop it.
    demo = subprocess.Popen(
        ['sh', '-c', 'trap "" INT; exec "$0" tools/demo.py --serve',
         sys.executable], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=stderr,
        env=dict(os.environ, PYTHONUNBUFFERED='1'))
    lines = queue.Queue()

    def forward():
        for line in demo.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=forward, daemon=True).start()
    printed = []
    while True:
        try:
            line = lines.get(timeout=300)
        except queue.Empty:
            stop(demo)
            raise AssertionError('the demo never said it was serving')
        assert line is not None, 'the demo ended (stderr above)'
        printed.append(line)
        if line.startswith(SERVING):
            url = line[len(SERVING):].split()[0]
            return demo, ''.join(printed), url


def test_demo_shows_what_the_readme_promises_and_serves_on(tmp_path):
    with open(tmp_path / 'stderr', 'w+') as stderr:
        try:
            demo, stdout, url = serve_demo(stderr)
        finally:
            stderr.seek(0)
            sys.stderr.write(stderr.read())
    try:
        # --serve: the demo's Zaqar still answers, its data still there.
        reply = requests.get(url + '/v2/queues/dead/messages', timeout=10,
                             params={'echo': 'true'},
                             headers={'Client-ID': str(uuid.uuid4()),
                                      'X-Project-ID': 'demo'})
        assert reply.status_code == 200, reply.text
        assert [m['body'] for m in reply.json()['messages']] == [
            'poison pill']
        # Ctrl-C stops Zaqar and redis-server and ends the demo cleanly.
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) == 0, (tmp_path / 'stderr').read_text()
        try:
            requests.get(url + '/v2/health', timeout=5)
        except requests.ConnectionError:
            pass
        else:
            raise AssertionError('Zaqar still answers after Ctrl-C')
    finally:
        stop(demo)
    lines = {}
    for line in stdout.splitlines():
        label, _, rest = line.partition(':')
        lines.setdefault(label.strip(), []).append(rest.strip())

    # Delay: only the undelayed message is visible at first, then each
    # becomes claimable when due.
    assert lines['visible now'] == ["[{'order': 2, 'note': 'delay 0'}]"]
    assert "'order': 1" in lines['claim after 3 s'][0]
    assert "'order': 3" in lines['claim after 6 s'][0]
    assert lines['delay=true -> 400 delay must be an integer from 0 to 900 '
                 'seconds; got True'] == ['']
    # Groups: the second claimer waits for c1's head.
    assert lines['consumer B claims'] == [
        'None (c1 waits for its first message)']
    assert "'remove apples'" in stdout.split('B claims:')[-1]
    # Bounded redelivery.
    assert lines['attempt 3 gets'] == ['None']
    assert lines['dead-letter queue'] == ["['poison pill']"]
    # Retention: loosening refused, length and time kept exactly, the
    # daemon removes and counts.
    assert any(label.startswith('audit _retention time 60 -> 400 '
                                '_retention.time must be an integer from 1 '
                                'to 4 seconds; got 60') for label in lines)
    assert lines['5 posted, length 3'] == [
        "['event 2', 'event 3', 'event 4']"]
    assert lines['after 4 s (time 4)'] == ['[]']
    assert '5 removed by retention' in lines['zaqar-delay-gc'][0]
    assert lines['stats'][-1].startswith('total=0 retention=')
    assert "'removed': 5" in lines['stats'][-1]
    # Persistent consumer: a page not acknowledged is read again, a rewind
    # is refused.
    assert lines['resumes (no marker)'] == ['[3, 4, 5]']
    assert any(label.startswith('rewind -> 400 marker 2 does not match')
               for label in lines)
    assert "'lost': 0" in lines['subscription options'][0]
    # Worker library: the failing event ends as a dead letter.
    assert lines['dead letter'] == ["Refund {'order': 7} after 2 attempts"]
