"""A real, throw-away, single-node OpenStack Swift on loopback for tests.

Uses Debian's packaged Swift (``swift``, ``swift-proxy``, ``swift-account``,
``swift-container``, ``swift-object`` with its object-updater,
``swift-object-expirer``) plus
``memcached`` (tempauth refuses to issue tokens without a cache).  Install them
with ``scripts/install-swift.sh``.  With ``keystone=`` the proxy also takes
Keystone tokens (``authtoken`` from Debian's ``python3-keystonemiddleware``,
then Swift's ``keystoneauth``) for accounts ``KEY_<project id>``; tempauth
keeps its ``AUTH_`` accounts.

The servers run under the *system* python (``/usr/bin/python3``) as separate
processes, so this module imports only the standard library and can be used
from any interpreter / virtualenv.

Usage::

    with SwiftServer() as swift:
        conn = swiftclient.client.Connection(
            authurl=swift.auth_url, user=swift.user, key=swift.key,
            auth_version='1')

Everything (configs, rings, the ``sdb1`` device, logs) lives in a private
temp dir; nothing under ``/etc/swift`` is read or written.  Note that Swift
(2.30) always reads ``/etc/swift/swift.conf`` -- ``swift_dir`` only moves the
rings, and there is no ``SWIFT_CONF_FILE`` environment variable.  Each server
is therefore started through a tiny bootstrap that calls
``swift.common.utils.set_swift_dir(<temp dir>)`` before anything else of
Swift is imported, then runs the packaged ``/usr/bin/swift-*`` script with
``runpy``.  The bootstrap also replaces Swift's syslog handler with a null
handler and passes ``-v`` so every server logs to stderr, which is redirected
to ``<temp dir>/log/<server>.log`` (no /dev/log or rsyslog needed).
"""

import atexit
import contextlib
import errno
import glob
import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse
import uuid

__all__ = [
    'SwiftServer',
    'SwiftUnavailable',
    'SwiftStartError',
    'ensure_swift_installed',
    'missing_swift_binaries',
    'swift_available',
]

# Overridable for unusual layouts (e.g. Swift pip-installed into a venv).
DEFAULT_PYTHON = os.environ.get('SWIFT_PYTHON', '/usr/bin/python3')
DEFAULT_BIN_DIR = os.environ.get('SWIFT_BIN_DIR', '/usr/bin')
# WARNING: each server logging every request (INFO) cost about a seventh
# of the test Swift's CPU, and the suite is CPU-bound. Set INFO to see
# every request in <temp dir>/log/ when a test needs explaining.
LOG_LEVEL = os.environ.get('ZAQAR_DELAY_SWIFT_LOG_LEVEL', 'WARNING')
SERVER_BINARIES = (
    'swift-proxy-server',
    'swift-account-server',
    'swift-container-server',
    'swift-object-server',
    'swift-object-updater',
)
OPTIONAL_BINARIES = ('swift-container-updater', 'swift-object-expirer')
MEMCACHED_CANDIDATES = ('/usr/bin/memcached', '/usr/sbin/memcached',
                        '/usr/local/bin/memcached')
INSTALL_HINT = 'run scripts/install-swift.sh (as root) to install them'
KEYSTONE_MIDDLEWARE = 'python3-keystonemiddleware'
# Swift's keystoneauth accounts, beside tempauth's AUTH_ ones.
KEYSTONE_PREFIX = 'KEY_'

# Runs inside /usr/bin/python3: point Swift at our swift.conf *before* any
# module that parses it at import time (storage_policy, constraints) is
# loaded, silence syslog, then hand over to the packaged script.
# gc.freeze(): the object-updater forks a child every pass (interval 1 s,
# below), and each child cost 0.42 s of CPU, 42% of a core for each test
# Swift even when idle, with up to three of them alive per test worker.
# Freezing the imported objects (out of the collector's reach in the
# child, whose pages it would otherwise walk and copy; inferred from the
# effect) cuts that to 0.05 s per pass; request costs are unchanged.
_BOOTSTRAP = textwrap.dedent('''\
    import gc, logging, runpy, sys
    import swift.common.utils as _u
    _u.set_swift_dir(sys.argv[1])
    class _NoSyslog(logging.NullHandler):
        def __init__(self, *args, **kwargs):
            logging.NullHandler.__init__(self)
    if hasattr(_u, 'ThreadSafeSysLogHandler'):
        _u.ThreadSafeSysLogHandler = _NoSyslog
    _script = sys.argv[2]
    sys.argv = [_script] + sys.argv[3:]
    gc.freeze()
    runpy.run_path(_script, run_name='__main__')
''')

# Builds the three rings in one process: the same RingBuilder calls that
# ``swift-ring-builder X create/add/rebalance`` make, but ~0.3 s instead of
# ~0.8 s per ring (three CLI rings cost ~2.4 s on a 2-core box).
_RING_SCRIPT = textwrap.dedent('''\
    import json, os, sys
    import swift.common.utils as _u
    _u.set_swift_dir(sys.argv[1])
    from swift.common.ring import RingBuilder
    spec = json.loads(sys.argv[2])
    for name, port in spec['ports'].items():
        b = RingBuilder(spec['part_power'], 1, 1)
        b.add_dev({'id': 0, 'region': 1, 'zone': 1, 'ip': spec['ip'],
                   'port': port, 'replication_ip': spec['ip'],
                   'replication_port': port, 'device': 'sdb1',
                   'weight': 100.0, 'meta': ''})
        b.rebalance()
        b.save(os.path.join(sys.argv[1], name + '.builder'))
        b.get_ring().save(os.path.join(sys.argv[1], name + '.ring.gz'))
''')


class SwiftUnavailable(RuntimeError):
    """Swift (or memcached) is not installed; tests should skip (or fail in
    CI)."""

    def __init__(self, missing):
        self.missing = list(missing)
        hint = INSTALL_HINT
        if KEYSTONE_MIDDLEWARE in self.missing:
            hint += ' (%s: scripts/setup.sh test)' % KEYSTONE_MIDDLEWARE
        super().__init__(
            'OpenStack Swift is not available: missing %s; %s'
            % (', '.join(self.missing), hint))


class SwiftStartError(RuntimeError):
    """Swift is installed but did not come up (message has the log tails)."""


def _find_memcached():
    for path in MEMCACHED_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which('memcached')


def missing_swift_binaries(python=DEFAULT_PYTHON, bin_dir=DEFAULT_BIN_DIR,
                           expirer=False, keystone=False):
    """Return the list of missing programs (empty when everything's there);
    with ``keystone``, also the package of keystonemiddleware when
    ``python`` cannot import it."""
    missing = []
    if not os.access(python, os.X_OK):
        missing.append(python)
    elif keystone and subprocess.run(
            [python, '-c', 'import keystonemiddleware.auth_token'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=_clean_env()).returncode != 0:
        missing.append(KEYSTONE_MIDDLEWARE)
    names = SERVER_BINARIES + (OPTIONAL_BINARIES if expirer else ())
    for name in names:
        if not os.path.isfile(os.path.join(bin_dir, name)):
            missing.append(os.path.join(bin_dir, name))
    if not _find_memcached():
        missing.append('memcached')
    return missing


def ensure_swift_installed(python=DEFAULT_PYTHON, bin_dir=DEFAULT_BIN_DIR,
                           expirer=False, keystone=False):
    """Raise SwiftUnavailable naming the missing binaries, if any."""
    missing = missing_swift_binaries(python, bin_dir, expirer, keystone)
    if missing:
        raise SwiftUnavailable(missing)


def swift_available(**kwargs):
    return not missing_swift_binaries(**kwargs)


def _clean_env():
    """This environment without what would leak a venv / pyenv into the
    system python."""
    env = dict(os.environ)
    for var in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV',
                'PYTHONSTARTUP'):
        env.pop(var, None)
    return env


def _free_ports(host, count):
    """Find `count` distinct free TCP ports by binding to port 0."""
    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _supports_xattr(directory):
    probe = os.path.join(directory, '.xattr-probe-%s' % uuid.uuid4().hex)
    try:
        with open(probe, 'w'):
            pass
        os.setxattr(probe, 'user.swift.probe', b'1')
        return os.getxattr(probe, 'user.swift.probe') == b'1'
    except (OSError, AttributeError):
        return False
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass


def _die_with_parent():
    """preexec_fn: have the kernel SIGTERM the child if we die (even by
    SIGKILL, e.g. a CI timeout), so servers are never orphaned.  Linux only;
    silently a no-op elsewhere.  Survives the exec, and Swift's
    drop_privileges() to the *same* user does not clear it."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _tail(path, lines=40):
    try:
        with open(path, 'rb') as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            data = f.read().decode('utf-8', 'replace')
    except OSError as e:
        return '<cannot read %s: %s>' % (path, e)
    return '\n'.join(data.splitlines()[-lines:])


class _Proc(object):
    def __init__(self, name, popen, log_path):
        self.name = name
        self.popen = popen
        self.log_path = log_path


def _tree_cpu_seconds(pid):
    """utime + stime of ``pid``, its reaped children (cutime + cstime) and
    its live children; 0 for a process that ended meanwhile."""
    try:
        with open('/proc/%d/stat' % pid) as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            children = [int(child) for child in f.read().split()]
    except OSError:
        return 0.0
    ticks = sum(int(field) for field in fields[11:15])
    return (ticks / os.sysconf('SC_CLK_TCK')
            + sum(map(_tree_cpu_seconds, children)))


_LIVE = set()  # servers started and not yet stopped (for atexit)


@atexit.register
def _stop_all_at_exit():
    for server in list(_LIVE):
        try:
            server.stop()
        except Exception:
            pass


class SwiftServer(object):
    """A single-node Swift (proxy + account/container/object + memcached).

    Constructor arguments (all optional, keyword):
      host            loopback address to bind (default '127.0.0.1')
      base_dir        parent dir for the temp dir (default: $TMPDIR, falling
                      back to /dev/shm then the cwd if it lacks user xattrs,
                      which the object server needs)
      startup_timeout seconds to wait for readiness (default 60)
      part_power      ring partition power (default 6: 64 partitions)
      python          interpreter that can import swift (/usr/bin/python3)
      bin_dir         where the swift-* scripts live (/usr/bin)
      keep_dir        keep the temp dir after stop() (for debugging)
      extra_env       extra environment for the server processes
      keystone        options of keystonemiddleware's ``authtoken`` (the
                      service user that validates tokens: auth_url,
                      username, password, project_name, ...): the proxy
                      then also serves Keystone tokens, every project
                      member (role admin or member) owning account
                      KEY_<project id>; register ``keystone_endpoint`` as
                      the object-store service in that Keystone
      workers         worker processes per server (Swift's ``workers``;
                      default 0: one process serving every request, as the
                      tests want; a production Swift forks one per core)

    After start():
      url             http://127.0.0.1:PROXYPORT
      auth_url        http://127.0.0.1:PROXYPORT/auth/v1.0
      user, key       'test:tester' / 'testing'   (.admin of AUTH_test)
      user2, key2     'test2:tester2' / 'testing2' (.admin of AUTH_test2)
      admin_user, admin_key  'admin:admin' / 'admin' (.reseller_admin: may
                      touch every account -- do not use for isolation tests)
      spare_user(i)   (user, key) of AUTH_t<i>, 0 <= i < SPARE_ACCOUNTS:
                      accounts tests take in turn, so that what one test
                      leaves does not make the next one's gc slower
      storage_url, storage_url2   http://127.0.0.1:PORT/v1/AUTH_test(2)
      keystone_endpoint  http://127.0.0.1:PORT/v1/KEY_$(project_id)s
      proxy_port, account_port, container_port, object_port, memcached_port
      conf_dir (= swift_dir), devices_dir, log_dir
      startup_seconds  wall time start() took
    """

    user = 'test:tester'
    key = 'testing'
    user2 = 'test2:tester2'
    key2 = 'testing2'
    admin_user = 'admin:admin'
    admin_key = 'admin'
    account = 'AUTH_test'
    account2 = 'AUTH_test2'
    policy_alias = 'zaqar-fixture'
    SPARE_ACCOUNTS = 32

    def __init__(self, host='127.0.0.1', base_dir=None, startup_timeout=60.0,
                 part_power=6, python=DEFAULT_PYTHON, bin_dir=DEFAULT_BIN_DIR,
                 keep_dir=False, extra_env=None, keystone=None, workers=0):
        self.host = host
        self.workers = int(workers)
        self.keystone = dict(keystone) if keystone else None
        self.base_dir = base_dir
        self.startup_timeout = float(startup_timeout)
        self.part_power = int(part_power)
        self.python = python
        self.bin_dir = bin_dir
        self.keep_dir = keep_dir
        self.extra_env = dict(extra_env or {})
        self.conf_dir = None
        self.devices_dir = None
        self.log_dir = None
        self.proxy_port = self.account_port = None
        self.container_port = self.object_port = self.memcached_port = None
        self.startup_seconds = None
        self._procs = []
        self._started = False

    # ------------------------------------------------------------------ API
    @property
    def url(self):
        return 'http://%s:%d' % (self.host, self.proxy_port)

    @property
    def auth_url(self):
        return self.url + '/auth/v1.0'

    @property
    def storage_url(self):
        return '%s/v1/%s' % (self.url, self.account)

    @property
    def storage_url2(self):
        return '%s/v1/%s' % (self.url, self.account2)

    @property
    def keystone_endpoint(self):
        """The object-store URL for Keystone's catalog (which fills in
        the project id)."""
        return '%s/v1/%s$(project_id)s' % (self.url, KEYSTONE_PREFIX)

    @property
    def credentials(self):
        """kwargs for swiftclient.client.Connection (first account)."""
        return {'authurl': self.auth_url, 'user': self.user, 'key': self.key,
                'auth_version': '1'}

    @property
    def credentials2(self):
        """kwargs for swiftclient.client.Connection (second account)."""
        return {'authurl': self.auth_url, 'user': self.user2,
                'key': self.key2, 'auth_version': '1'}

    @property
    def running(self):
        return self._started and all(
            p.popen.poll() is None for p in self._procs)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        if self._started:
            return self
        t0 = time.monotonic()
        ensure_swift_installed(self.python, self.bin_dir,
                               keystone=bool(self.keystone))
        memcached = _find_memcached()
        self._make_dirs()
        (self.proxy_port, self.account_port, self.container_port,
         self.object_port, self.memcached_port) = _free_ports(self.host, 5)
        self._started = True
        _LIVE.add(self)
        try:
            self._write_configs()
            self._spawn_memcached(memcached)
            self._build_rings()
            for name in ('object', 'container', 'account', 'proxy'):
                conf = os.path.join(self.conf_dir, '%s-server.conf' % name)
                self._spawn_swift(name + '-server',
                                  'swift-%s-server' % name, [conf, '-v'])
            self._spawn_swift(
                'object-updater', 'swift-object-updater',
                [os.path.join(self.conf_dir, 'object-server.conf'), '-v'])
            self._wait_ready(t0 + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def cpu_seconds(self):
        """CPU seconds (user + system) the servers and memcached have used,
        with their worker processes and the children they waited for: the
        object-updater forks one per sweep, and it may end between two
        reads."""
        return sum(_tree_cpu_seconds(p.popen.pid) for p in self._procs
                   if p.popen.poll() is None)

    def stop(self):
        """Terminate what we started (by PID / process group), remove dir."""
        procs, self._procs = self._procs, []
        for p in procs:
            self._signal(p.popen, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in procs:
            try:
                p.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(p.popen, signal.SIGKILL)
                p.popen.wait(10)
        self._started = False
        _LIVE.discard(self)
        if self._root and not self.keep_dir:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def restart_proxy(self, down_seconds=0.5, timeout=60.0):
        """SIGKILL the proxy server (requests in flight die with it), wait
        ``down_seconds``, start it again on the same port and wait until it
        serves. Storage servers and memcached keep running. Call it from
        a thread that outlives the server: the new proxy gets SIGTERM when
        its parent thread ends (``_die_with_parent``)."""
        proxy = [p for p in self._procs if p.name == 'proxy-server']
        for p in proxy:
            self._signal(p.popen, signal.SIGKILL)
            p.popen.wait(10)
            self._procs.remove(p)
        time.sleep(down_seconds)
        conf = os.path.join(self.conf_dir, 'proxy-server.conf')
        self._spawn_swift('proxy-server', 'swift-proxy-server', [conf, '-v'])
        self._wait_ready(time.monotonic() + timeout)

    def drop_listing_row(self, container, obj):
        """Take one object's row out of its container listing and leave
        the object in place: the state of a write whose container update
        the container server did not take (it waits in async_pending).
        A backend DELETE newer than the object, so the object-updater
        never brings the row back."""
        import sqlite3
        pattern = os.path.join(self.devices_dir, '*', 'containers', '*',
                               '*', '*', '*.db')
        for path in glob.glob(pattern):
            with contextlib.closing(sqlite3.connect(
                    'file:%s?mode=ro' % path, uri=True)) as db:
                account, name = db.execute(
                    'SELECT account, container FROM container_stat'
                ).fetchone()
            if name != container:
                continue
            parts = os.path.relpath(path, self.devices_dir).split(os.sep)
            device, partition = parts[0], parts[2]
            conn = http.client.HTTPConnection(self.host,
                                              self.container_port, timeout=10)
            try:
                conn.request('DELETE', '/%s/%s/%s' % (
                    device, partition, urllib.parse.quote(
                        '%s/%s/%s' % (account, container, obj))), headers={
                    'X-Timestamp': '%016.05f' % time.time(),
                    'X-Backend-Storage-Policy-Index': '0'})
                status = conn.getresponse().status
            finally:
                conn.close()
            if status // 100 != 2:
                raise SwiftStartError('listing row delete: HTTP %d' % status)
            return
        raise SwiftStartError('no container database for %r' % container)

    def log_tails(self, lines=30):
        """Last lines of every log file (for error messages)."""
        out = []
        if self.log_dir and os.path.isdir(self.log_dir):
            for name in sorted(os.listdir(self.log_dir)):
                path = os.path.join(self.log_dir, name)
                out.append('==> %s <==\n%s' % (path, _tail(path, lines)))
        return '\n'.join(out)

    def spare_user(self, index):
        """(user, key) of spare account ``AUTH_t<index>``."""
        return 't%d:tester' % (index % self.SPARE_ACCOUNTS), 'testing'

    def get_auth(self, user=None, key=None):
        """Return (storage_url, token) via tempauth v1."""
        status, headers, _ = self._request(
            'GET', '/auth/v1.0',
            {'X-Auth-User': user or self.user, 'X-Auth-Key': key or self.key})
        if status // 100 != 2:
            raise SwiftStartError('auth failed: HTTP %d' % status)
        return headers['x-storage-url'], headers['x-auth-token']

    def info(self):
        status, _, body = self._request('GET', '/info')
        return json.loads(body.decode('utf-8'))

    def run_expirer_once(self, timeout=120):
        """Delete every object whose X-Delete-At has passed, then return.

        Expired objects already 404 on GET/HEAD without this, but they stay
        in container listings (and counts) until the expirer deletes them.
        Swift queues expirations as rows in auto-created containers of the
        hidden ``.expiring_objects`` account; those containers only show up
        in the account listing the expirer reads after a container-updater
        pass.  So this runs, in order::

            swift-container-updater container-server.conf --once
            swift-object-expirer object-expirer.conf --once

        (~0.7 s in all).  Raises SwiftStartError if either fails.
        """
        ensure_swift_installed(self.python, self.bin_dir, expirer=True)
        if not self._started:
            raise SwiftStartError('SwiftServer is not running')
        deadline = time.monotonic() + timeout
        self._run_once('container-updater', 'swift-container-updater',
                       'container-server.conf', deadline)
        self._run_once('object-expirer', 'swift-object-expirer',
                       'object-expirer.conf', deadline)

    def _run_once(self, name, script, conf_name, deadline):
        conf = os.path.join(self.conf_dir, conf_name)
        log_path = os.path.join(self.log_dir, name + '.log')
        with open(log_path, 'ab') as log:
            res = subprocess.run(
                self._bootstrap_cmd(script, [conf, '--once', '-v']),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=self._env(), cwd=self._root,
                timeout=max(1.0, deadline - time.monotonic()))
        if res.returncode != 0:
            raise SwiftStartError('%s exited %d\n%s'
                                  % (name, res.returncode, _tail(log_path)))
        return res

    # ------------------------------------------------------------ internals
    _root = None

    def _make_dirs(self):
        candidates = ([self.base_dir] if self.base_dir else
                      [tempfile.gettempdir(), '/dev/shm', os.getcwd()])
        for parent in candidates:
            if parent and os.path.isdir(parent) and _supports_xattr(parent):
                break
        else:
            raise SwiftStartError(
                'no directory with user xattr support among %s (the object '
                'server stores metadata in xattrs); pass base_dir=' %
                candidates)
        self._root = tempfile.mkdtemp(prefix='swift-server-', dir=parent)
        self.conf_dir = os.path.join(self._root, 'etc')
        self.devices_dir = os.path.join(self._root, 'devices')
        self.log_dir = os.path.join(self._root, 'log')
        self._cache_dir = os.path.join(self._root, 'cache')
        self._run_dir = os.path.join(self._root, 'run')
        for d in (self.conf_dir, os.path.join(self.devices_dir, 'sdb1'),
                  self.log_dir, self._cache_dir, self._run_dir):
            os.makedirs(d)

    def _write(self, name, text):
        with open(os.path.join(self.conf_dir, name), 'w') as f:
            f.write(textwrap.dedent(text))

    def _write_configs(self):
        user = pwd.getpwuid(os.getuid()).pw_name
        common = dict(host=self.host, user=user, workers=self.workers,
                      swift_dir=self.conf_dir,
                      devices=self.devices_dir, cache=self._cache_dir,
                      memcache='%s:%d' % (self.host, self.memcached_port),
                      log_level=LOG_LEVEL)
        self._write('swift.conf', '''\
            [swift-hash]
            swift_hash_path_suffix = %(suffix)s
            swift_hash_path_prefix = %(prefix)s

            [storage-policy:0]
            name = Policy-0
            aliases = %(alias)s
            default = yes
            ''' % dict(suffix=uuid.uuid4().hex, prefix=uuid.uuid4().hex,
                       alias=self.policy_alias))
        backend = '''\
            [DEFAULT]
            bind_ip = %(host)s
            bind_port = %(port)d
            workers = %(workers)d
            user = %(user)s
            swift_dir = %(swift_dir)s
            devices = %(devices)s
            mount_check = false
            disable_fallocate = true
            log_name = %(kind)s-server
            log_level = %(log_level)s
            recon_cache_path = %(cache)s
            eventlet_debug = false

            [pipeline:main]
            pipeline = healthcheck %(kind)s-server

            [filter:healthcheck]
            use = egg:swift#healthcheck

            [app:%(kind)s-server]
            use = egg:swift#%(kind)s
            %(extra)s
            '''
        self._write('account-server.conf', backend % dict(
            common, kind='account', port=self.account_port, extra=''))
        self._write('container-server.conf', backend % dict(
            common, kind='container', port=self.container_port, extra='') +
            textwrap.dedent('''
            # Used by run_expirer_once(): reports the auto-created
            # .expiring_objects task containers to the account server.
            [container-updater]
            interval = 1
            concurrency = 1
            containers_per_second = 10000
            account_suppression_time = 0
            '''))
        self._write('object-server.conf', backend % dict(
            common, kind='object', port=self.object_port,
            extra='mb_per_sync = 512\n            keep_cache_size = 0') +
            textwrap.dedent('''
            # A container update the container server did not take in
            # time (a loaded machine) waits in async_pending until this
            # daemon sends it, as on every real Swift; until then the
            # container listing lacks the change.
            [object-updater]
            interval = 1
            concurrency = 1
            objects_per_second = 1000
            '''))
        self._write('proxy-server.conf', '''\
            [DEFAULT]
            bind_ip = %(host)s
            bind_port = %(port)d
            workers = %(workers)d
            user = %(user)s
            swift_dir = %(swift_dir)s
            log_name = proxy-server
            log_level = %(log_level)s
            eventlet_debug = false

            [pipeline:main]
            pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk tempurl %(auth)s copy slo dlo versioned_writes symlink proxy-logging proxy-server

            [app:proxy-server]
            use = egg:swift#proxy
            account_autocreate = true
            allow_account_management = true
            # Never error-limit our only node for a minute because it was
            # probed before it was listening.
            error_suppression_limit = 100000
            error_suppression_interval = 1
            conn_timeout = 2
            node_timeout = 30
            recheck_account_existence = 5
            recheck_container_existence = 5

            [filter:tempauth]
            use = egg:swift#tempauth
            user_admin_admin = admin .admin .reseller_admin
            user_test_tester = testing .admin
            user_test2_tester2 = testing2 .admin
            %(spare_users)s

            [filter:cache]
            use = egg:swift#memcache
            memcache_servers = %(memcache)s

            [filter:catch_errors]
            use = egg:swift#catch_errors

            [filter:gatekeeper]
            use = egg:swift#gatekeeper

            [filter:healthcheck]
            use = egg:swift#healthcheck

            [filter:proxy-logging]
            use = egg:swift#proxy_logging

            [filter:listing_formats]
            use = egg:swift#listing_formats

            [filter:bulk]
            use = egg:swift#bulk

            [filter:tempurl]
            use = egg:swift#tempurl

            [filter:copy]
            use = egg:swift#copy

            [filter:slo]
            use = egg:swift#slo

            [filter:dlo]
            use = egg:swift#dlo

            [filter:versioned_writes]
            use = egg:swift#versioned_writes
            allow_versioned_writes = true

            [filter:symlink]
            use = egg:swift#symlink
            ''' % dict(common, port=self.proxy_port, spare_users=(
            '\n' + ' ' * 12).join(
                'user_t%d_tester = testing .admin' % i
                for i in range(self.SPARE_ACCOUNTS)),
            auth='authtoken keystoneauth tempauth' if self.keystone
            else 'tempauth') + self._keystone_filters())
        # Legacy (object-expirer.conf) layout: the file name must contain
        # "expirer", and it doubles as the internal client's pipeline.
        self._write('object-expirer.conf', '''\
            [DEFAULT]
            user = %(user)s
            swift_dir = %(swift_dir)s
            log_name = object-expirer
            log_level = %(log_level)s

            [object-expirer]
            interval = 1
            report_interval = 3600
            concurrency = 1
            recon_cache_path = %(cache)s

            [pipeline:main]
            pipeline = catch_errors proxy-logging cache proxy-server

            [app:proxy-server]
            use = egg:swift#proxy
            error_suppression_limit = 100000

            [filter:cache]
            use = egg:swift#memcache
            memcache_servers = %(memcache)s

            [filter:catch_errors]
            use = egg:swift#catch_errors

            [filter:proxy-logging]
            use = egg:swift#proxy_logging
            access_log_name = object-expirer
            ''' % common)

    def _keystone_filters(self):
        """authtoken decides nothing itself (delay_auth_decision): a
        tempauth token it cannot validate goes on to tempauth, which
        authorizes it after keystoneauth."""
        if not self.keystone:
            return ''
        options = dict(self.keystone, delay_auth_decision='true')
        # Indented as the proxy's config, which _write dedents.
        return textwrap.indent(textwrap.dedent('''
            [filter:authtoken]
            paste.filter_factory = keystonemiddleware.auth_token:filter_factory
            %s

            [filter:keystoneauth]
            use = egg:swift#keystoneauth
            reseller_prefix = %s
            operator_roles = admin, member
            ''') % ('\n'.join('%s = %s' % item for item in options.items()),
                    KEYSTONE_PREFIX), ' ' * 12)

    def _env(self):
        env = _clean_env()
        env['PYTHONDONTWRITEBYTECODE'] = '1'
        env['PYTHONUNBUFFERED'] = '1'
        env.update(self.extra_env)
        return env

    def _bootstrap_cmd(self, script, args):
        return [self.python, '-c', _BOOTSTRAP, self.conf_dir,
                os.path.join(self.bin_dir, script)] + list(args)

    def _spawn(self, name, cmd):
        log_path = os.path.join(self.log_dir, name + '.log')
        log = open(log_path, 'ab')
        try:
            popen = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=self._env(), cwd=self._root, start_new_session=True,
                close_fds=True, preexec_fn=_die_with_parent)
        finally:
            log.close()
        self._procs.append(_Proc(name, popen, log_path))
        return popen

    def _spawn_swift(self, name, script, args):
        return self._spawn(name, self._bootstrap_cmd(script, args))

    def _spawn_memcached(self, memcached):
        cmd = [memcached, '-l', self.host, '-p', str(self.memcached_port),
               '-U', '0', '-m', '32', '-t', '1', '-c', '256']
        if os.getuid() == 0:
            cmd += ['-u', 'root']
        self._spawn('memcached', cmd)

    def _build_rings(self):
        spec = json.dumps({
            'part_power': self.part_power, 'ip': self.host,
            'ports': {'account': self.account_port,
                      'container': self.container_port,
                      'object': self.object_port}})
        log_path = os.path.join(self.log_dir, 'ring-builder.log')
        with open(log_path, 'ab') as log:
            res = subprocess.run(
                [self.python, '-c', _RING_SCRIPT, self.conf_dir, spec],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=self._env(), cwd=self._root, timeout=120)
        if res.returncode != 0:
            raise SwiftStartError('building rings failed (exit %d)\n%s'
                                  % (res.returncode, _tail(log_path)))

    @staticmethod
    def _signal(popen, sig):
        # Only while the child is un-reaped (poll() is None) is its PID --
        # and, thanks to start_new_session=True, its process group -- still
        # guaranteed to be ours.  Signal the group (catches forked workers,
        # though workers = 0 means there are none) and fall back to the PID.
        if popen.poll() is not None:
            return
        try:
            os.killpg(popen.pid, sig)
        except OSError as e:
            if e.errno != errno.ESRCH:
                try:
                    popen.send_signal(sig)
                except OSError:
                    pass

    def _request(self, method, path, headers=None, body=None, timeout=10):
        conn = http.client.HTTPConnection(self.host, self.proxy_port,
                                          timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return (resp.status,
                    {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            conn.close()

    def _check_alive(self):
        for p in self._procs:
            rc = p.popen.poll()
            if rc is not None:
                raise SwiftStartError(
                    '%s exited with code %s during startup\n%s'
                    % (p.name, rc, self.log_tails()))

    def _wait_ports(self, deadline):
        pending = {self.memcached_port, self.account_port,
                   self.container_port, self.object_port, self.proxy_port}
        while pending:
            self._check_alive()
            for port in list(pending):
                try:
                    socket.create_connection((self.host, port), 0.2).close()
                    pending.discard(port)
                except OSError:
                    pass
            if pending:
                if time.monotonic() > deadline:
                    raise SwiftStartError(
                        'timed out waiting for ports %s\n%s'
                        % (sorted(pending), self.log_tails()))
                time.sleep(0.05)

    def _probe(self):
        """One full round trip: auth, container PUT, object PUT/GET/DELETE."""
        # Use the reseller admin's own account (AUTH_admin) so that the test
        # accounts AUTH_test / AUTH_test2 start out untouched.
        storage_url, token = self.get_auth(self.admin_user, self.admin_key)
        path = urllib.parse.urlparse(storage_url).path
        cont = '%s/.probe-%s' % (path, uuid.uuid4().hex)
        auth = {'X-Auth-Token': token}
        steps = [('PUT', cont, None), ('PUT', cont + '/o', b'probe'),
                 ('GET', cont + '/o', None), ('DELETE', cont + '/o', None),
                 ('DELETE', cont, None)]
        for method, p, body in steps:
            hdrs = dict(auth)
            if body is not None:
                hdrs['Content-Length'] = str(len(body))
            status, _, data = self._request(method, p, hdrs, body)
            if status // 100 != 2:
                raise SwiftStartError('%s %s -> HTTP %d %r'
                                      % (method, p, status, data[:200]))

    def _wait_ready(self, deadline):
        self._wait_ports(deadline)
        last = None
        while True:
            self._check_alive()
            try:
                self._probe()
                return
            except (OSError, http.client.HTTPException, KeyError,
                    SwiftStartError) as e:
                last = e
            if time.monotonic() > deadline:
                raise SwiftStartError(
                    'Swift did not become ready within %.0fs (last error: '
                    '%s)\n%s' % (self.startup_timeout, last, self.log_tails()))
            time.sleep(0.1)


def _main(argv):
    """``python swift_server.py``: start, print credentials, wait for ^C."""
    def _on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _on_term)
    with SwiftServer() as s:
        print(json.dumps({'auth_url': s.auth_url, 'user': s.user,
                          'key': s.key, 'user2': s.user2, 'key2': s.key2,
                          'startup_seconds': round(s.startup_seconds, 2),
                          'dir': s._root}, indent=2))
        sys.stdout.flush()
        try:
            while s.running:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == '__main__':
    sys.exit(_main(sys.argv[1:]))
