"""Swift connections, authentication, and the one place Swift faults are
handled.

Expected answers (404 Not Found, 412 Precondition Failed, 409 Conflict) come
back as values; anything else (5xx after retries, lost connections, 401
after re-authentication) becomes Zaqar's storage ConnectionError, which the
transport answers with 503.
"""

import concurrent.futures
import io
import json
import threading
import time
import uuid
from urllib import parse

import swiftclient
from keystoneauth1 import session as keystone_session
from keystoneauth1.identity import generic
from oslo_log import log as logging

from zaqar_delay import errors as zd_errors
from zaqar_delay.drivers.swift import clients

LOG = logging.getLogger(__name__)

SCHEMES = ('delay.swift', 'swift')
AUTH_SYSTEMS = ('v1', 'keystone')
LISTING_LIMIT = 10000   # Swift's default container_listing_limit
# Names per bulk delete. Swift's bulk middleware deletes them a few at a
# time (delete_concurrency, default 2) before it answers, so 1000 took
# longer than ``timeout`` on a loaded cluster and the client retried the
# whole request. A removal batch (tuples_per_iteration messages, several
# names each) is sent as as many requests of this size as it needs.
BULK_LIMIT = 200
OWNER = 'X-Object-Meta-Zd-Owner'
# The shared pool holds what this many operations may have in flight.
OPERATIONS_PER_POOL = 2
# Queues whose names a Store keeps for creating their containers.
QUEUE_META_KEPT = 10000
# A container PUT answered 404 found its account missing. With
# account_autocreate, a request making that account at the same moment
# leaves the proxy's cache saying "missing" until it finishes (Swift
# caches the 404 it read before), so the PUT is tried again after these
# waits (seconds) before an account that stays missing is an error.
ACCOUNT_MISSING_WAITS = (0.1, 0.3, 1.0)


def rewindable(body):
    """(contents, content length) of ``body`` as swiftclient can send it
    again: it retries a PUT (a lost connection, a 5xx) only when it can
    rewind the body, and fails the first retry of a non-empty ``bytes``
    body ("no ability to reset contents"), so one transient error failed
    a post. A PUT sent again
    writes the same object under the same name; an exclusive one
    (If-None-Match) answers 412 to its own first attempt, which its
    callers read back as theirs (``create``, the message PUT's adopt)."""
    if isinstance(body, bytes) and body:
        return io.BytesIO(body), len(body)
    return body, None


class Endpoint:
    """What a ``delay.swift://`` URI says, parsed once."""

    def __init__(self, uri, default_auth):
        parsed = parse.urlparse(uri)
        if parsed.scheme not in SCHEMES:
            raise ValueError('Swift URI must start with delay.swift:// or '
                             'swift://; got {!r}'.format(parsed.scheme))
        query = {k: v[-1] for k, v in parse.parse_qs(parsed.query).items()}
        self.auth = query.get('auth', default_auth)
        if self.auth not in AUTH_SYSTEMS:
            raise ValueError('auth must be one of {}; got {!r}'.format(
                ', '.join(AUTH_SYSTEMS), self.auth))
        self.user = parse.unquote(parsed.username or '')
        self.key = parse.unquote(parsed.password or '')
        if self.auth == 'v1':
            if not parsed.hostname:
                raise ValueError('v1 auth needs a host in the Swift URI')
            scheme = 'https' if query.get('tls') in ('1', 'true') else 'http'
            self.auth_url = '{}://{}{}'.format(
                scheme, parsed.netloc.rpartition('@')[2],
                parsed.path or '/auth/v1.0')
            self.project = None
        else:
            self.auth_url = None
            self.project = parse.unquote(parsed.path.lstrip('/'))


class Store:
    """Thread-safe access to one Swift account.

    Each thread keeps its own swiftclient connection (HTTP keep-alive); the
    token is shared. ``parallel`` fans per-object requests out over a small
    pool, so an operation on N messages costs about one round trip, not N.
    """

    def __init__(self, conf):
        self.conf = conf
        self.endpoint = Endpoint(conf.uri, conf.auth_system)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._session = None
        self._storage_url = None
        self._token = None
        # Twice what one operation may use: a slow operation (a tenant's
        # backlog, a slow container) leaves the other half to the rest.
        self._pool = concurrent.futures.ThreadPoolExecutor(
            OPERATIONS_PER_POOL * conf.max_parallel_requests,
            thread_name_prefix='zd-swift')
        self._bulk = None
        # {container: metadata} of the queues operated on (queue_meta):
        # whatever write creates a container gives it its queue's names.
        self._queue_meta = {}
        # {container: [its lock, when this store last made it]}, so that
        # the writes that met its absence together make it once
        # (make_container), and one slow container holds up no other.
        self._made = {}
        self._made_lock = threading.Lock()

    # -- connections -------------------------------------------------------

    def _connect(self):
        common = dict(retries=self.conf.retries, timeout=self.conf.timeout,
                      insecure=self.conf.insecure, starting_backoff=0.2,
                      max_backoff=2)
        if self.endpoint.auth == 'v1':
            return clients.Connection(
                authurl=self.endpoint.auth_url, user=self.endpoint.user,
                key=self.endpoint.key, auth_version='1',
                preauthurl=self._storage_url, preauthtoken=self._token,
                **common)
        with self._lock:
            if self._session is None:
                self._session = self._keystone_session()
        url = self._session.get_endpoint(
            service_type='object-store', interface=self.conf.interface,
            region_name=self.conf.region_name)
        return clients.Connection(
            session=self._session, os_options={'object_storage_url': url},
            **common)

    def _keystone_session(self):
        auth = generic.Password(
            username=self.endpoint.user, password=self.endpoint.key,
            project_name=self.endpoint.project,
            user_domain_id=self.conf.user_domain_id,
            user_domain_name=self.conf.user_domain_name,
            project_domain_id=self.conf.project_domain_id,
            project_domain_name=self.conf.project_domain_name,
            auth_url=self.conf.auth_url)
        return keystone_session.Session(auth=auth,
                                        verify=not self.conf.insecure)

    @property
    def client(self):
        conn = getattr(self._local, 'conn', None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def call(self, method, *args, expect=(), **kwargs):
        """Run one swiftclient call; return the status of an expected
        failure (an int), or the call's result."""
        try:
            result = getattr(self.client, method)(*args, **kwargs)
        except swiftclient.ClientException as exc:
            if exc.http_status in expect:
                return exc.http_status
            LOG.error('Swift %s failed: %s', method, exc)
            raise zd_errors.BackendUnavailable(backend='Swift', reason=exc)
        except Exception as exc:
            LOG.error('Swift unreachable (%s): %s', method, exc)
            self._local.conn = None
            raise zd_errors.BackendUnavailable(backend='Swift', reason=exc)
        if self.endpoint.auth == 'v1' and self._token is None:
            self._storage_url, self._token = (self.client.url,
                                              self.client.token)
        return result

    # -- objects -----------------------------------------------------------

    def put(self, container, name, body=b'', content_type=None,
            headers=None, exclusive=False, container_meta=None,
            recreate=False):
        """PUT an object; with ``exclusive`` only if it does not exist.
        Returns False on 412 (it existed), True when written. A container
        that is gone is created again only with ``recreate``: only the
        writes that start a queue (a post's positions, a sticky client's
        activity) make its container; any other write in flight while the
        queue is deleted (a claim's locks and record, a filing, a pin, a
        removal marker, gc's summary) would make the deleted queue's
        container again, with objects nothing ever removes. Such a write
        returns False."""
        headers = dict(headers or {})
        if exclusive:
            headers['If-None-Match'] = '*'
        for _ in range(3):
            contents, length = rewindable(body)
            sent = time.monotonic()
            status = self.call('put_object', container, name, contents,
                               content_length=length,
                               content_type=content_type, headers=headers,
                               expect=(404, 412))
            if status == 412:
                return False
            if status != 404:
                return True
            if not recreate:
                # A proxy may take a container made moments ago for a
                # missing one (its cache): a HEAD asks the container
                # server itself, and refreshes that cache.
                if self.container_meta(container) is None:
                    return False
                continue
            self.make_container(container, sent, container_meta
                                or self._queue_meta.get(container))
        raise zd_errors.BackendUnavailable(
            backend='Swift',
            reason='container {} keeps disappearing'.format(container))

    def create(self, container, name, body=b'', content_type=None,
               headers=None, container_meta=None, token=None,
               recreate=False):
        """Create an object that must have one creator; True if we are it.

        Swift checks ``If-None-Match: *`` when a PUT reaches the object
        server but takes no lock, so PUTs that overlap in flight can all
        succeed, and the one with the newest timestamp is what remains. So
        every creator tags its PUT with a random owner token, waits
        ``create_settle_time`` for overlapping PUTs to land, and reads the
        object back: only the creator whose token stayed wins. The same
        read-back tells a retried PUT (412 to our own first attempt whose
        reply was lost) that it won after all; so a 412 waits too, as a
        PUT that overlapped that first attempt may still land. ``token``:
        the owner token to write (a random one if None), for a creator
        that later checks the object is still its own. ``recreate``: as
        for ``put``.
        """
        token = token or uuid.uuid4().hex
        self.propose(container, name, token, body, content_type, headers,
                     container_meta, recreate)
        self.settle_wait()
        return self.confirm(container, name, token)

    def create_many(self, container, items, meanwhile=None,
                    recreate=False, alongside=None):
        """``create`` of each (name, kwargs) item, all PUTs first and then
        all read-backs, so the call waits ``create_settle_time`` once, not
        once per wave of max_parallel_requests; ``meanwhile`` as for
        ``settle_wait``, ``recreate`` as for ``put``; ``alongside``, a
        request that must follow the PUTs, is sent as the wait begins,
        beside ``meanwhile``, and answered before this returns. True for
        each one won."""
        tokens = [uuid.uuid4().hex for _ in items]
        self.parallel(
            lambda pair: self.propose(container, pair[0][0], pair[1],
                                      recreate=recreate, **pair[0][1]),
            list(zip(items, tokens)))
        after_puts = self.in_background(alongside) if alongside else None
        if items:
            # After a 412 too: see create.
            self.settle_wait(meanwhile)
        elif meanwhile is not None:
            meanwhile()
        won = self.parallel(
            lambda pair: self.confirm(container, pair[0][0], pair[1]),
            list(zip(items, tokens)))
        if after_puts is not None:
            after_puts.result()
        return won

    def propose(self, container, name, token, body=b'', content_type=None,
                headers=None, container_meta=None, recreate=False):
        """The first half of ``create``: the exclusive PUT, tagged with
        ``token``. False if the object existed (412): ours from an earlier
        attempt whose reply was lost, or a rival's; ``confirm`` tells."""
        headers = dict(headers or {}, **{OWNER: token})
        return self.put(container, name, body, content_type, headers,
                        exclusive=True, container_meta=container_meta,
                        recreate=recreate)

    def settle_wait(self, meanwhile=None):
        """Let PUTs that overlapped a proposal land before its read-back
        (``create``): after this, the object holds the last of them.

        ``meanwhile``: requests whose outcome does not depend on the
        read-back, run during the wait instead of after it (Swift is idle
        while we wait); only what they leave of the wait is slept."""
        started = time.monotonic()
        if meanwhile is not None:
            meanwhile()
        time.sleep(max(0.0, self.conf.create_settle_time
                       - (time.monotonic() - started)))

    def confirm(self, container, name, token):
        """The second half of ``create``, after ``settle_wait``: True if
        the object is still the one ``token`` wrote."""
        found = self.head(container, name)
        return found is not None and found.get(OWNER.lower()) == token

    def get(self, container, name):
        """(headers, bytes) or None."""
        found = self.call('get_object', container, name, expect=(404,))
        return None if found == 404 else found

    def get_json(self, container, name):
        found = self.get(container, name)
        return None if found is None else (found[0], json.loads(found[1]))

    def head(self, container, name):
        found = self.call('head_object', container, name, expect=(404,))
        return None if found == 404 else found

    def post(self, container, name, headers):
        """Replace an object's metadata; False if it does not exist (a POST
        never creates, so it cannot resurrect a deleted message)."""
        return self.call('post_object', container, name, headers,
                         expect=(404,)) != 404

    def delete(self, container, name):
        self.call('delete_object', container, name, expect=(404, 409))

    def delete_many(self, container, names):
        """Delete objects in one bulk-delete request per BULK_LIMIT names,
        or one DELETE each where the bulk middleware is not installed."""
        names = list(dict.fromkeys(names))
        if not names:
            return
        if len(names) == 1:
            # A plain DELETE: one pass through the proxy, not two.
            self.delete(container, names[0])
            return
        if not self._has_bulk_delete():
            self.parallel(lambda n: self.delete(container, n), names)
            return
        for start in range(0, len(names), BULK_LIMIT):
            body = '\n'.join(
                '/{}/{}'.format(parse.quote(container, safe=''),
                                parse.quote(n))
                for n in names[start:start + BULK_LIMIT])
            _, reply = self.call('post_account',
                                 {'Content-Type': 'text/plain',
                                  'Accept': 'application/json'},
                                 query_string='bulk-delete',
                                 data=body.encode())
            self._check_bulk(reply)

    @staticmethod
    def _check_bulk(reply):
        """The bulk middleware answers 200 before it deletes anything and
        reports each failure in the body: raise unless every name was
        deleted, absent (404) or in conflict (409, a newer write). The
        parsed reply otherwise."""
        try:
            result = json.loads(reply)
        except (TypeError, ValueError):
            result = {}
        errors = [e for e in result.get('Errors', [])
                  if not str(e[1]).startswith(('404', '409'))]
        status = str(result.get('Response Status', ''))
        if errors or not (status.startswith('2') or result.get('Errors')):
            raise zd_errors.BackendUnavailable(
                backend='Swift', reason='bulk delete failed: {} {}'.format(
                    status or 'unreadable reply', errors[:3]))
        return result

    def _has_bulk_delete(self):
        if self._bulk is None:
            try:
                info = self.client.get_capabilities()
                self._bulk = 'bulk_delete' in info
            except Exception:
                self._bulk = False
        return self._bulk

    # -- containers --------------------------------------------------------

    def queue_meta(self, container, meta):
        """Remember the names of the queue ``container`` holds: a write
        that creates it (the first one need not be a post: a sticky
        client's activity) stores them with it, and gc finds a queue only
        by them."""
        if len(self._queue_meta) >= QUEUE_META_KEPT:
            self._queue_meta.clear()
        self._queue_meta[container] = meta

    def make_container(self, container, sent, meta=None):
        """Create ``container``, found missing by a write sent at ``sent``
        (monotonic), unless this store made it since then: the parallel
        PUTs of a queue's first post all meet its absence, and one
        container PUT serves them all. A write sent after it was made
        that still found it missing makes it again (deleted since, or a
        proxy that still took it for missing)."""
        with self._made_lock:
            if len(self._made) >= QUEUE_META_KEPT:
                self._made.clear()
            made = self._made.setdefault(container, [threading.Lock(), None])
        with made[0]:
            if made[1] is not None and made[1] >= sent:
                return
            self.put_container(container, meta)
            made[1] = time.monotonic()

    def put_container(self, container, meta=None):
        headers = {'X-Container-Meta-' + k: parse.quote(v, safe='')
                   for k, v in (meta or {}).items()}
        for wait in ACCOUNT_MISSING_WAITS:
            if self.call('put_container', container, headers=headers,
                         expect=(404,)) != 404:
                return
            time.sleep(wait)
        self.call('put_container', container, headers=headers)

    def container_meta(self, container):
        found = self.call('head_container', container, expect=(404,))
        if found == 404:
            return None
        prefix = 'x-container-meta-'
        return {k[len(prefix):]: parse.unquote(v) for k, v in found.items()
                if k.startswith(prefix)}

    def delete_container(self, container):
        """Delete an empty container; False if listings still show objects
        (409) so the caller may try again."""
        return self.call('delete_container', container,
                         expect=(404, 409)) != 409

    def listing(self, container, prefix, marker=None, end_marker=None,
                limit=None, reverse=False):
        """One page of a container listing (dicts with name, content_type,
        last_modified); [] if the container does not exist."""
        found = self.call('get_container', container, prefix=prefix,
                          marker=marker, end_marker=end_marker,
                          limit=limit or LISTING_LIMIT,
                          query_string='reverse=on' if reverse else None,
                          expect=(404,))
        return [] if found == 404 else found[1]

    def listing_all(self, container, prefix, marker=None, end_marker=None,
                    cap=None):
        """Every entry under ``prefix`` (page by page), at most ``cap``."""
        out = []
        while cap is None or len(out) < cap:
            limit = LISTING_LIMIT if cap is None else min(
                LISTING_LIMIT, cap - len(out))
            page = self.listing(container, prefix, marker, end_marker,
                                limit=limit)
            out.extend(page)
            if len(page) < limit:
                break
            marker = page[-1]['name']
        return out

    def containers(self, prefix, limit=None):
        """Names of the account's containers starting with ``prefix``:
        every one, or the first ``limit``."""
        if limit is None:
            found = self.call('get_account', prefix=prefix,
                              full_listing=True)
        else:
            found = self.call('get_account', prefix=prefix, limit=limit)
        return [c['name'] for c in found[1]]

    # -- fan-out -----------------------------------------------------------

    def in_background(self, fn):
        """Start ``fn()`` in the shared pool while the caller goes on (in
        line from a pool thread, as ``parallel``); ``.result()`` of what
        this returns waits for it and raises what it raised."""
        if not threading.current_thread().name.startswith('zd-swift'):
            return self._pool.submit(fn)
        done = concurrent.futures.Future()
        try:
            done.set_result(fn())
        except Exception as exc:
            done.set_exception(exc)
        return done

    def parallel(self, fn, items):
        """``[fn(item) for item in items]``, up to max_parallel_requests at
        once: each call keeps that many in the shared pool, never all of
        its items queued there, so operations running at once share it
        instead of one waiting for another's backlog. Nested calls (from
        a pool thread) run in line. The first failure (in item order) is
        raised once what was in flight has finished; nothing more is
        started after one."""
        items = list(items)
        if len(items) < 2 or threading.current_thread().name.startswith(
                'zd-swift'):
            return [fn(item) for item in items]
        results, failures, in_flight = [None] * len(items), {}, {}
        waiting = iter(enumerate(items))

        def start_next():
            for index, item in waiting:
                in_flight[self._pool.submit(fn, item)] = index
                return

        for _ in range(self.conf.max_parallel_requests):
            start_next()
        while in_flight:
            done, _ = concurrent.futures.wait(
                in_flight, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                index = in_flight.pop(future)
                try:
                    results[index] = future.result()
                except Exception as exc:
                    failures[index] = exc
                if not failures:
                    start_next()
        if failures:
            raise failures[min(failures)]
        return results

    def alive(self):
        try:
            self.client.head_account()
            return True
        except Exception:
            return False

    def close(self):
        self._pool.shutdown(wait=False)
