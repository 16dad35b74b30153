"""Zaqar itself, configured with a zaqar-delay driver.

``write_config`` makes a zaqar.conf; ``WsgiApp`` serves Zaqar's real WSGI
app in this process on a loopback port; ``ZaqarServer`` runs the
``zaqar-server`` console script as a separate process, as an operator would.
"""

import os
import socket
import subprocess
import sys
import threading
import time
from wsgiref import simple_server

from localstack import processes
from localstack import scratch
from localstack.redis_server import free_port

CONFIG = """[DEFAULT]
auth_strategy = {auth_strategy}
debug = false
use_stderr = true
unreliable = {unreliable}

[drivers]
transport = wsgi
message_store = {message_store}
management_store = {management_store}

[drivers:transport:wsgi]
bind = 127.0.0.1
port = {port}

[drivers:management_store:{management_store}]
uri = {management_uri}

{store_section}

[transport]
max_message_delay = {max_delay}
{transport_options}
[signed_url]
secret_key = zaqar-delay-tests
{extra}"""


def write_config(directory, redis_url, port, message_store='delay.redis',
                 store_options=None, max_delay=900, management_store='redis',
                 management_uri=None, unreliable=False, auth_strategy='',
                 extra='', transport_options=None):
    """Write zaqar.conf for ``message_store`` and return its path.

    Queue metadata goes to Zaqar's Redis control driver on ``redis_url``
    unless another ``management_store`` is named. ``unreliable`` lets
    Zaqar's MongoDB drivers run on a server that is not a replica set.
    ``extra`` is appended verbatim (for example a ``[keystone_authtoken]``
    section to go with ``auth_strategy='keystone'``); ``transport_options``
    go to ``[transport]`` (Zaqar's limits).
    """
    options = dict(store_options or {})
    section = '[drivers:message_store:{}]\n'.format(message_store) + ''.join(
        '{} = {}\n'.format(k, v) for k, v in options.items())
    path = os.path.join(directory, 'zaqar.conf')
    with open(path, 'w') as conf_file:
        conf_file.write(CONFIG.format(
            message_store=message_store, port=port,
            management_store=management_store,
            management_uri=management_uri or redis_url,
            unreliable=str(unreliable).lower(),
            store_section=section, max_delay=max_delay,
            auth_strategy=auth_strategy, extra=extra,
            transport_options=''.join(
                '{} = {}\n'.format(k, v)
                for k, v in (transport_options or {}).items())))
    return path


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class WsgiApp:
    """Zaqar's WSGI app from ``zaqar.bootstrap``, served on a thread."""

    def __init__(self, config_path):
        from oslo_config import cfg
        from zaqar import bootstrap
        conf = cfg.ConfigOpts()
        conf(args=[], project='zaqar', default_config_files=[config_path])
        self.bootstrap = bootstrap.Bootstrap(conf)
        self.app = self.bootstrap.transport.app
        self.port = free_port()
        self._server = simple_server.make_server(
            '127.0.0.1', self.port, self.app,
            handler_class=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        daemon=True)

    @property
    def url(self):
        return 'http://127.0.0.1:{}'.format(self.port)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


class ZaqarServer:
    """``zaqar-server --config-file zaqar.conf`` in its own process."""

    def __init__(self, redis_url, message_store='delay.redis',
                 store_options=None, environment=None, **config):
        # ``environment``: variables added to the server's (for example a
        # PYTHONPATH that registers a benchmark's own store).
        self.environment = environment
        self.workdir = scratch.scratch_dir('zd-zaqar-')
        self.port = free_port()
        self.config = write_config(self.workdir, redis_url, self.port,
                                   message_store, store_options, **config)
        self.process = None

    @property
    def url(self):
        return 'http://127.0.0.1:{}'.format(self.port)

    def start(self, timeout=60):
        binary = os.path.join(os.path.dirname(sys.executable),
                              'zaqar-server')
        self.log = open(os.path.join(self.workdir, 'zaqar.log'), 'wb')
        self.process = subprocess.Popen(
            [binary, '--config-file', self.config], stdout=self.log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, **self.environment or {}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                socket.create_connection(('127.0.0.1', self.port), 0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        with open(os.path.join(self.workdir, 'zaqar.log')) as log:
            raise RuntimeError('zaqar-server did not start:\n' + log.read())

    def stop(self):
        processes.stop(self.process)
        self.process = None
