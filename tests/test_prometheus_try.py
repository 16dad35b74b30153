"""A real try of the Grafana dashboard and the alert rules: promtool
checks the rules; Debian's Prometheus scrapes ``zaqar-delay-gc
--metrics_port`` every second while a workload runs on a real Redis, loads
the rules and evaluates them, and answers every PromQL expression of every
panel; the per-queue message panels show what queue stats say."""

import json
import re
import shutil
import subprocess
import threading
import time

import requests
import yaml

from localstack.redis_server import free_port
from tests.conftest import unavailable
from tests.test_dashboards import ALERTS
from tests.test_dashboards import DASHBOARD
from tests.test_metrics_exporter import make_queues
from tests.test_metrics_exporter import passes
from tests.test_metrics_exporter import scrape
from tests.test_metrics_exporter import start_daemon
from tests.test_metrics_exporter import store  # noqa: F401 (fixture)
from tests.test_metrics_exporter import workload

PROJECT, QUEUE = 'p', 'bulk'     # the queue workload() fills
# make_queues() and workload() make these.
QUEUES = (QUEUE, 'carts', 'carts-dead', 'events', 'orders', 'zz-extra')
CONFIG = """
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ['{rules}']
scrape_configs:
  - job_name: zaqar-delay-gc
    static_configs:
      - targets: ['127.0.0.1:{port}']
"""
# What Grafana puts for its variables: one project and one queue picked, or
# "All" (the variables' allValue); $__rate_interval is four scrape
# intervals at least.
PICKED = {'project': PROJECT, 'queue': QUEUE, '__rate_interval': '4s',
          '__interval': '1s', '__range': '5m'}
ALL = dict(PICKED, project='.*', queue='.*')
VARIABLE = re.compile(r'\$\{?(\w+)\}?')
LABEL_VALUES = re.compile(r'^label_values\((.*), *(\w+)\)$')


def binary(name):
    found = shutil.which(name)
    if not found:
        unavailable('{} not found: install Debian package prometheus '
                    '(scripts/setup.sh test does)'.format(name))
    return found


def until(what, done):
    """Polls ``done()`` until it returns something true; Prometheus scrapes
    and evaluates every second, so this waits a few seconds at most."""
    deadline = time.monotonic() + 120
    while True:
        result = done()
        if result:
            return result
        assert time.monotonic() < deadline, 'never: ' + what
        time.sleep(0.2)


class Prometheus:
    """A Prometheus of this test alone on a free loopback port."""

    def __init__(self, executable, directory, target_port):
        config = directory / 'prometheus.yml'
        config.write_text(CONFIG.format(rules=ALERTS, port=target_port))
        address = '127.0.0.1:{}'.format(free_port())
        self.base = 'http://{}/'.format(address)
        self.log = directory / 'prometheus.log'
        with open(self.log, 'wb') as log:
            self.process = subprocess.Popen(
                [executable, '--config.file', str(config),
                 '--storage.tsdb.path', str(directory / 'data'),
                 '--web.listen-address', address],
                stdout=log, stderr=subprocess.STDOUT)

    def ready(self):
        """Whether it serves queries yet (it answers 503 while starting)."""
        assert self.process.poll() is None, self.log.read_text()
        try:
            return requests.get(self.base + '-/ready', timeout=10).ok
        except requests.ConnectionError:
            return False

    def get(self, path, **params):
        """``data`` of a successful API answer."""
        assert self.process.poll() is None, self.log.read_text()
        answer = requests.get(self.base + 'api/v1/' + path, params=params,
                              timeout=10)
        body = answer.json()
        assert body['status'] == 'success', (path, params, body)
        return body['data']

    def query(self, expression):
        """[(labels, value)] of an instant query, which must be accepted."""
        data = self.get('query', query=expression)
        assert data['resultType'] in ('vector', 'scalar'), expression
        if data['resultType'] == 'scalar':
            return [({}, float(data['result'][1]))]
        return [(series['metric'], float(series['value'][1]))
                for series in data['result']]

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=60)


def grafana(expression, variables):
    """``expression`` with the dashboard variables replaced as Grafana
    does before it sends the query."""
    replaced = VARIABLE.sub(lambda match: variables[match.group(1)],
                            expression)
    assert '$' not in replaced, replaced
    return replaced


def dashboard():
    return json.loads(DASHBOARD.read_text())


def alert_rules():
    return [rule for group in yaml.safe_load(ALERTS.read_text())['groups']
            for rule in group['rules']]


def test_promtool_accepts_the_alert_rules():
    checked = subprocess.run([binary('promtool'), 'check', 'rules',
                              str(ALERTS)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert 'SUCCESS: {} rules found'.format(len(alert_rules())) in \
        checked.stdout, checked.stdout


def test_prometheus_answers_every_panel_and_rule(store, tmp_path):  # noqa
    executable = binary('prometheus')   # before starting anything
    config, driver = store
    make_queues(driver)
    port = free_port()
    daemon = start_daemon(config, port)
    prometheus = Prometheus(executable, tmp_path, port)
    stop = threading.Event()
    worker = threading.Thread(target=workload, args=(driver, stop))
    worker.start()
    try:
        try:
            until('Prometheus is ready', prometheus.ready)
            until('the exporter is up', lambda: any(
                target['health'] == 'up' for target in prometheus.get(
                    'targets')['activeTargets']))
            # Scraped while the workload runs.
            until('the workload queue is scraped', lambda: prometheus.query(
                'zaqar_delay_queue_messages{queue="%s"}' % QUEUE))
        finally:
            stop.set()
            worker.join()
        # The snapshot taken after pass P + 1 began after the workload
        # stopped (tests/test_metrics_exporter.py says why); once
        # Prometheus holds pass P + 2, its latest scrape shows it.
        after = passes(scrape('http://127.0.0.1:{}/metrics'.format(port)))
        until('Prometheus holds a snapshot after the workload', lambda: any(
            value >= after + 2 for _labels, value in prometheus.query(
                'zaqar_delay_gc_passes_total')))
        check_panels(prometheus, driver)
        check_variables(prometheus)
        check_rules(prometheus)
    finally:
        prometheus.stop()
        daemon.terminate()
        daemon.wait(timeout=60)


def check_panels(prometheus, driver):
    """Every expression of every panel is accepted, with one queue picked
    and with All; the panels of per-queue messages show queue stats."""
    messages = driver.message_controller
    picked = messages.stats(QUEUE, PROJECT)['messages']
    states = ('free', 'delayed', 'claimed')
    everywhere = {state: sum(messages.stats(queue, PROJECT)['messages'][state]
                             for queue in QUEUES) for state in states}
    shown = {}
    for panel in dashboard()['panels']:
        for target in panel['targets']:
            shown[panel['title'], target['refId']] = [
                prometheus.query(grafana(target['expr'], variables))
                for variables in (PICKED, ALL)]
    by_state = shown['Messages by state', 'A']
    for result, counts in zip(by_state, (picked, everywhere)):
        assert {labels['state']: value for labels, value in result} == {
            state: counts[state] for state in states}
    one, every = shown['Delayed backlog per queue', 'A']
    assert [(labels['queue'], value) for labels, value in one] == [
        (QUEUE, picked['delayed'])]
    assert {labels['queue']: value for labels, value in every} == {
        queue: messages.stats(queue, PROJECT)['messages']['delayed']
        for queue in QUEUES}
    _one, every = shown['Dead letters held', 'A']
    assert {labels['queue']: value for labels, value in every} == {
        'carts': messages.stats('carts-dead', PROJECT)['messages']['total']}
    groups, in_flight = (shown['Message groups', ref][0][0][1]
                         for ref in 'AB')
    assert (groups, in_flight) == (picked['groups'],
                                   picked['groups_in_flight'])
    # The workload posted, claimed and deleted: every state was seen.
    assert picked['free'] and picked['claimed']


def check_variables(prometheus):
    """The variables' label_values() queries, as Grafana asks them."""
    for variable in dashboard()['templating']['list']:
        if variable['type'] != 'query':
            continue
        selector, label = LABEL_VALUES.match(
            variable['query']['query']).groups()
        values = prometheus.get('label/{}/values'.format(label), **{
            'match[]': grafana(selector, ALL)})
        assert PICKED[variable['name']] in values, (variable['name'], values)


def check_rules(prometheus):
    """Each rule's expression is accepted as a query, and Prometheus
    loaded every rule and evaluated it without error."""
    written = [rule['expr'] for rule in alert_rules()]
    for expression in written:
        prometheus.query(expression)

    def loaded():
        return [rule for group in prometheus.get('rules')['groups']
                for rule in group['rules']]

    until('every rule is evaluated', lambda: all(
        rule['health'] != 'unknown' for rule in loaded()))
    rules = loaded()
    assert len(rules) == len(written)
    assert not [(rule['name'], rule['health'], rule.get('lastError'))
                for rule in rules if rule['health'] != 'ok']
