"""The README's first command runs tools/demo.py: what it shows must hold.

Each assertion is a line the demo prints about one behaviour (delay,
groups, dead letters, retention with the cleanup daemon, a persistent
consumer, the worker library), so a regression in any of them fails here
rather than in front of a reader.
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_shows_what_the_readme_promises():
    result = subprocess.run([sys.executable, 'tools/demo.py'], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = {}
    for line in result.stdout.splitlines():
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
    assert "'remove apples'" in result.stdout.split('B claims:')[-1]
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
