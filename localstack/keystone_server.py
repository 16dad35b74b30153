"""A real Keystone on sqlite, bootstrapped with ``keystone-manage``.

Keystone pins its own oslo and SQLAlchemy versions, so it lives in its own
venv (``.venv-keystone``, made by ``scripts/setup.sh test``; override with
``ZD_KEYSTONE_VENV``) and runs as a separate process through
``keystone_wsgi.py``. Imports only the standard library.
"""

import json
import os
import subprocess
import time
import urllib.error
import urllib.request

from localstack import processes
from localstack import scratch
from localstack.redis_server import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ADMIN_PASSWORD = 'zaqar-delay-admin'
REGION = 'RegionOne'

CONFIG = """[DEFAULT]
use_stderr = true

[database]
connection = sqlite:///{workdir}/keystone.db

[cache]
# Without a cache each token validation costs 0.5-1 s on a small machine.
enabled = true
backend = dogpile.cache.memory

[identity]
# The cheapest bcrypt cost: these passwords guard a throwaway test cloud.
password_hash_algorithm = bcrypt
password_hash_rounds = 4

[fernet_tokens]
key_repository = {workdir}/fernet-keys

[fernet_receipts]
key_repository = {workdir}/fernet-receipts

[credential]
key_repository = {workdir}/credential-keys
"""


class KeystoneUnavailable(RuntimeError):
    pass


def venv_dir():
    return os.environ.get('ZD_KEYSTONE_VENV',
                          os.path.join(ROOT, '.venv-keystone'))


def request(method, url, body=None, token=None):
    """One JSON request; returns (headers, parsed body)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header('Content-Type', 'application/json')
    if token:
        req.add_header('X-Auth-Token', token)
    with urllib.request.urlopen(req, timeout=60) as reply:
        payload = reply.read()
        return reply.headers, json.loads(payload) if payload else None


class KeystoneServer:
    """Keystone on a free loopback port; ``url`` is its ``/v3`` root."""

    def __init__(self, venv=None):
        self.venv = venv or venv_dir()
        self.port = None
        self.process = None
        self.workdir = None

    @property
    def url(self):
        return 'http://127.0.0.1:{}/v3'.format(self.port)

    def _bin(self, name):
        path = os.path.join(self.venv, 'bin', name)
        if not os.path.exists(path):
            raise KeystoneUnavailable(
                '{} not found: run scripts/setup.sh test (or set '
                'ZD_KEYSTONE_VENV)'.format(path))
        return path

    def _manage(self, *args):
        subprocess.run([self._bin('keystone-manage'), '--config-file',
                        self.config] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self, timeout=120):
        self.workdir = scratch.scratch_dir('zd-keystone-')
        self.port = free_port()
        self.config = os.path.join(self.workdir, 'keystone.conf')
        with open(self.config, 'w') as conf_file:
            conf_file.write(CONFIG.format(workdir=self.workdir))
        user = ['--keystone-user', str(os.getuid()),
                '--keystone-group', str(os.getgid())]
        self._manage('db_sync')
        self._manage('fernet_setup', *user)
        self._manage('credential_setup', *user)
        self._manage('bootstrap', '--bootstrap-password', ADMIN_PASSWORD,
                     '--bootstrap-admin-url', self.url,
                     '--bootstrap-public-url', self.url,
                     '--bootstrap-internal-url', self.url,
                     '--bootstrap-region-id', REGION)
        self.log = open(os.path.join(self.workdir, 'keystone.log'), 'wb')
        self.process = subprocess.Popen(
            [self._bin('python'), os.path.join(HERE, 'keystone_wsgi.py'),
             str(self.port), self.config],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                request('GET', self.url)
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
        self.stop()
        with open(os.path.join(self.workdir, 'keystone.log')) as log:
            raise KeystoneUnavailable('keystone did not start:\n' +
                                      log.read()[-4000:])

    def admin_token(self):
        headers, _ = request('POST', self.url + '/auth/tokens', {
            'auth': {
                'identity': {'methods': ['password'], 'password': {'user': {
                    'name': 'admin', 'domain': {'id': 'default'},
                    'password': ADMIN_PASSWORD}}},
                'scope': {'project': {'name': 'admin',
                                      'domain': {'id': 'default'}}}}})
        return headers['X-Subject-Token']

    def service_options(self):
        """keystonemiddleware ``authtoken`` options for a service that
        validates tokens as the bootstrap admin."""
        return {'www_authenticate_uri': self.url, 'auth_url': self.url,
                'auth_type': 'password', 'username': 'admin',
                'password': ADMIN_PASSWORD, 'project_name': 'admin',
                'user_domain_id': 'default', 'project_domain_id': 'default'}

    def create_member(self, name, password):
        """A project ``name`` and a user ``name`` with the ``member``
        role on it (in the default domain)."""
        token = self.admin_token()
        _, project = request('POST', self.url + '/projects', {
            'project': {'name': name, 'domain_id': 'default'}}, token)
        _, user = request('POST', self.url + '/users', {
            'user': {'name': name, 'password': password,
                     'domain_id': 'default'}}, token)
        _, roles = request('GET', self.url + '/roles?name=member',
                           token=token)
        request('PUT', '{}/projects/{}/users/{}/roles/{}'.format(
            self.url, project['project']['id'], user['user']['id'],
            roles['roles'][0]['id']), token=token)

    def register_service(self, service_type, name, url):
        """Add a service and its endpoints to the catalog."""
        token = self.admin_token()
        _, body = request('POST', self.url + '/services', {
            'service': {'type': service_type, 'name': name}}, token)
        for interface in ('public', 'internal', 'admin'):
            request('POST', self.url + '/endpoints', {'endpoint': {
                'service_id': body['service']['id'], 'interface': interface,
                'url': url, 'region_id': REGION}}, token)

    def stop(self):
        processes.stop(self.process)
        self.process = None
