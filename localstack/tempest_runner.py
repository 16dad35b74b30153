"""Runs tempest, from its own venv, against a cloud on loopback.

Tempest pins its own oslo libraries, so it lives in ``.venv-tempest``
(``scripts/setup.sh test``; override with ``ZD_TEMPEST_VENV``), where
zaqar-delay is installed without dependencies so that tempest finds our
plugin through the ``tempest.test_plugins`` entry point. Imports only the
standard library.
"""

import os
import re
import signal
import subprocess

from localstack import scratch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CONFIG = """[DEFAULT]
log_file = {workdir}/tempest.log

[auth]
use_dynamic_credentials = true
admin_username = admin
admin_password = {admin_password}
admin_project_name = admin
admin_domain_name = Default

[identity]
uri_v3 = {keystone_url}
auth_version = v3
region = {region}

[identity-feature-enabled]
api_v2 = false

[service_available]
zaqar = true
# Else dynamic credentials try to give each test project a network.
neutron = false

[messaging]
catalog_type = messaging

[zaqar_delay]
max_message_delay = {max_message_delay}
"""

# stestr's closing summary, e.g. " - Passed: 23".
SUMMARY = re.compile(r'^ - (Passed|Failed|Skipped): (\d+)', re.M)


class TempestUnavailable(RuntimeError):
    pass


def venv_dir():
    return os.environ.get('ZD_TEMPEST_VENV',
                          os.path.join(ROOT, '.venv-tempest'))


class Tempest:
    """A tempest workspace in a scratch directory."""

    def __init__(self, venv=None):
        self.venv = venv or venv_dir()
        self.binary = os.path.join(self.venv, 'bin', 'tempest')
        if not os.path.exists(self.binary):
            raise TempestUnavailable(
                '{} not found: run scripts/setup.sh test (or set '
                'ZD_TEMPEST_VENV)'.format(self.binary))
        self.workdir = scratch.scratch_dir('zd-tempest-')
        self.config = os.path.join(self.workdir, 'tempest.conf')
        # The stestr repository tempest records results in; "tempest init"
        # would also register the workspace in ~/.tempest.
        subprocess.run([os.path.join(self.venv, 'bin', 'stestr'), 'init'],
                       cwd=self.workdir, check=True,
                       stdout=subprocess.DEVNULL)

    def write_config(self, keystone_url, admin_password, region,
                     max_message_delay=900):
        with open(self.config, 'w') as conf_file:
            conf_file.write(CONFIG.format(
                workdir=self.workdir, keystone_url=keystone_url,
                admin_password=admin_password, region=region,
                max_message_delay=max_message_delay))
        return self.config

    def run(self, *args, timeout=1200):
        """``tempest run ARGS`` in the workspace; a CompletedProcess."""
        return subprocess.run(
            self._command(args), cwd=self.workdir, env=self._env(),
            capture_output=True, text=True, timeout=timeout)

    def start(self, *args):
        """``tempest run ARGS`` in the background: a Run to finish later,
        so that a long run (upstream's suite sleeps minutes) overlaps
        other work."""
        return Run(self._command(args), self.workdir, self._env())

    def _command(self, args):
        return [self.binary, 'run', '--config-file', self.config] + list(
            args)

    @staticmethod
    def _env():
        env = dict(os.environ)
        # Our editable install must win over anything on PYTHONPATH that
        # was meant for the Zaqar venv.
        env.pop('PYTHONPATH', None)
        return env


class Run:
    """A tempest run in the background, in a process group of its own
    (stestr's workers are its children), its output in files of its
    workspace."""

    def __init__(self, command, workdir, env):
        self._out = open(os.path.join(workdir, 'run.out'), 'w+')
        self._err = open(os.path.join(workdir, 'run.err'), 'w+')
        self.process = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=self._out,
            stderr=self._err, text=True, start_new_session=True)

    def finish(self, timeout=1200):
        """Wait for the run: a CompletedProcess, as Tempest.run gives."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        outputs = []
        for stream in (self._out, self._err):
            stream.seek(0)
            outputs.append(stream.read())
        return subprocess.CompletedProcess(
            self.process.args, self.process.returncode, *outputs)

    def stop(self):
        """Stop the run and its workers if it is still going."""
        if self.process.poll() is None:
            # The group is the one this run started (its leader's PID).
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._out.close()
        self._err.close()


def summary(output):
    """{'Passed': n, 'Failed': n, 'Skipped': n} from stestr's output."""
    counts = {'Passed': 0, 'Failed': 0, 'Skipped': 0}
    counts.update((k, int(v)) for k, v in SUMMARY.findall(output))
    return counts
