"""The Grafana dashboard (etc/grafana) and the example alert rules
(etc/prometheus) are valid JSON / YAML and name only metrics that
``zaqar-delay-gc --metrics_port`` serves; the dashboard shows every one."""

import json
import pathlib
import re

import prometheus_client
import yaml
from prometheus_client.parser import text_string_to_metric_families

from zaqar_delay import driver
from zaqar_delay import exporter

ROOT = pathlib.Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / 'etc' / 'grafana' / 'zaqar-delay.json'
ALERTS = ROOT / 'etc' / 'prometheus' / 'zaqar-delay-alerts.yaml'
METRIC = re.compile(r'\bzaqar_delay_[a-z0-9_]+')


def served():
    """{family name: its sample names} of an exporter with one queue of
    every kind of content, after one pass and one failed pass."""
    served = exporter.Exporter(interval=60)
    served.record_pass(driver.GcPass(queues=1, expired=1, retention=1), 1.0)
    served.record_failure(RuntimeError('store down'))
    stats = {'messages': {'free': 1, 'delayed': 1, 'claimed': 1,
                          'groups': 1, 'groups_in_flight': 1},
             'retention': {'removed': 1}}
    consumer = {'lag': 1, 'lost': 1, 'idle': False}
    served.store.snapshot = exporter.Snapshot(
        samples=[exporter.QueueSample('p', 'q', stats, dead_letters=1,
                                      consumers={'c': consumer})], known=1)
    text = prometheus_client.generate_latest(served.registry).decode()
    # A counter family with no samples yet (no store fault so far) still
    # names its one series.
    return {family.name: {sample.name for sample in family.samples}
            | ({family.name + '_total'} if family.type == 'counter' else set())
            for family in text_string_to_metric_families(text)}


def named_in(expressions):
    return {name for expression in expressions
            for name in METRIC.findall(expression)}


def dashboard_expressions():
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard['panels']:
        for target in panel['targets']:
            yield target['expr']
    for variable in dashboard['templating']['list']:
        if variable['type'] == 'query':
            yield variable['query']['query']


def test_the_dashboard_shows_every_metric_and_only_those():
    families = served()
    samples = set().union(*families.values())
    used = named_in(dashboard_expressions())
    assert used and used <= samples, used - samples
    # Every family, by one of its samples (the _created timestamps are
    # prometheus_client's own).
    unused = {family for family, names in families.items()
              if not names & used and not family.endswith('_created')}
    assert not unused


def test_the_dashboard_panels_are_well_formed():
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel['id'] for panel in dashboard['panels']]
    assert len(ids) == len(set(ids))
    for panel in dashboard['panels']:
        assert panel['targets'] and panel['gridPos']['w'] > 0, panel['title']
        assert [t['refId'] for t in panel['targets']] == [
            chr(65 + i) for i in range(len(panel['targets']))]


def test_alert_rules_are_valid_and_name_served_metrics():
    rules = [rule for group in yaml.safe_load(ALERTS.read_text())['groups']
             for rule in group['rules']]
    samples = set().union(*served().values())
    assert {'ZaqarDelayDeadLettersGrowing', 'ZaqarDelayConsumerLostMessages',
            'ZaqarDelayGcSlowerThanItsInterval'} <= {r['alert']
                                                     for r in rules}
    for rule in rules:
        assert set(rule) <= {'alert', 'expr', 'for', 'labels',
                             'annotations'}, rule
        assert rule['annotations']['summary'], rule['alert']
        named = named_in([rule['expr']])
        assert named and named <= samples, (rule['alert'], named - samples)
