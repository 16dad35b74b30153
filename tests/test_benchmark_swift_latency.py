"""``python -m benchmarks.swift_latency`` at a tiny size: a row per
latency and workload, each with both drivers' rates and the requests
each sent per message, every one of them held for the added latency (no
rate is asserted but that it was measured: these machines are shared)."""

import re
import time

import pytest
from swiftclient import client as swift_client

from benchmarks import run
from benchmarks import swift_latency

pytestmark = [pytest.mark.integration]


def test_prints_both_drivers_at_each_latency(capsys, monkeypatch):
    made, make = [], run.swift_pair

    def swift_pair(*args, **options):
        made.append(make(*args, **options))
        return made[-1]

    monkeypatch.setattr(run, 'swift_pair', swift_pair)
    swift_latency.main(['--latency', '0', '--latency', '5',
                        '--messages', '20', '--rounds', '2',
                        '--parallel', '3'])
    out = capsys.readouterr().out
    # --parallel is our driver's max_parallel_requests.
    assert made[0][0].store.conf.max_parallel_requests == 3
    rows = re.findall(r'^(\S+) +(post \(10/post\)|claim\+delete '
                      r'\(10/claim\)) +(\d+) msg/s +(\d+) msg/s +[\d.]+x '
                      r'+([\d.]+) +([\d.]+)$', out, re.M)
    assert [(added, name) for added, name, *_ in rows] == [
        ('0', 'post (10/post)'), ('0', 'claim+delete (10/claim)'),
        ('5', 'post (10/post)'), ('5', 'claim+delete (10/claim)')], out
    # Both drivers' requests went through the hook that adds the latency:
    # a post of ours sends 4 per message and 2 per call (docs/swift.md),
    # Zaqar's 1 per message; each round's fresh queue adds a few, our
    # driver's authentication a few more in the first row.
    assert all(float(ours) > 0 and float(zaqars) > 0
               for *_, ours, zaqars in rows), out
    posts = [(float(ours), float(zaqars))
             for _, name, _, _, ours, zaqars in rows
             if name.startswith('post')]
    assert all(4.2 <= ours < 5.5 and 1 <= zaqars < 1.5
               for ours, zaqars in posts), out


def test_each_request_waits_the_added_latency_first(monkeypatch):
    """The hook sleeps before every request a swiftclient connection
    sends, counts it, hands it on with its arguments and its answer, and
    is gone afterwards."""
    sent = []

    def send(connection, *args, **kwargs):
        sent.append((time.monotonic(), args, kwargs))
        return 'answer'

    monkeypatch.setattr(swift_client.HTTPConnection, '_request', send)
    connection = swift_client.HTTPConnection('http://127.0.0.1:9/v1/a')
    latency = swift_latency.Latency(0.2)
    with latency.applied():
        started = time.monotonic()
        assert connection.request('HEAD', '/v1/a') == 'answer'
    assert latency.held == 1
    assert len(sent) == 1
    sent_at, args, _ = sent[0]
    assert sent_at - started >= 0.2
    assert args[0] == 'HEAD'
    connection.request('HEAD', '/v1/a')
    assert latency.held == 1
    assert len(sent) == 2
