"""Redis client construction and the one place Redis faults are handled."""

import functools
import os
import time
from urllib import parse

import redis
from oslo_log import log as logging
from oslo_utils import netutils
from redis import backoff
from redis import cluster
from redis import retry
from redis import sentinel

from zaqar_delay import errors
from zaqar_delay import metadata_copy
from zaqar_delay import tally

LOG = logging.getLogger(__name__)

SCHEMES = ('delay.redis', 'redis')
SENTINEL_PORT = 26379


# redis-py (5.x and later) retries failed commands by default. A retry
# below :func:`guarded` would re-run a script whose first run completed but
# whose reply was lost, behind the back of the token that makes the retry
# safe, so there is exactly one retry policy: ours.
NO_RETRY = dict(retry=retry.Retry(backoff.NoBackoff(), 0),
                retry_on_error=[])


def client_from_uri(uri, socket_timeout):
    """A redis-py client for ``delay.redis://`` (or ``redis://``) URIs,
    with redis-py's own retries off.

    Forms: ``delay.redis://[[user]:password@]host[:port][/db]``,
    ``delay.redis:///path/redis.sock[?db=N]``, Zaqar's Sentinel form
    ``delay.redis://[[user]:password@]host1[:port],host2[:port][/db]
    ?master=NAME[&sentinel_username=U&sentinel_password=P]`` (sentinel
    port 26379 by default; the password is the master's), and the Redis
    Cluster form ``delay.redis://[[user]:password@]host1[:port][,host2
    [:port],...]?cluster=true`` (seed nodes, any reachable one suffices).
    ``?dbid=N``, as in Zaqar's own URIs, is the same as ``/N``."""
    parsed = parse.urlparse(uri)
    if parsed.scheme not in SCHEMES:
        raise ValueError('Redis URI must start with delay.redis:// or '
                         'redis://; got {!r}'.format(parsed.scheme))
    query = dict(parse.parse_qsl(parsed.query))
    credentials, _, hosts = parsed.netloc.rpartition('@')
    username, _, password = credentials.partition(':')
    auth = dict(username=parse.unquote(username) or None,
                password=parse.unquote(password) or None)
    if is_cluster(query):
        if 'master' in query:
            raise ValueError(
                'Redis URI has both ?cluster=true and ?master={!r}: a Redis '
                'Cluster has no Sentinel master; give one or the other'
                .format(query['master']))
        return _cluster_client(hosts, _db(parsed, query), auth,
                               socket_timeout)
    if 'master' in query:
        return _sentinel_client(hosts, query, _db(parsed, query), auth,
                                socket_timeout)
    if ',' in hosts:
        raise ValueError('Redis URI names several hosts ({!r}) but no '
                         '?master=: a list of hosts is a list of Sentinels '
                         'and needs the name of the master they watch, or '
                         'the seed nodes of a Redis Cluster with '
                         '?cluster=true'.format(hosts))
    if parsed.hostname:
        return redis.Redis(host=parsed.hostname, port=parsed.port or 6379,
                           db=_db(parsed, query),
                           socket_timeout=socket_timeout, **auth,
                           **NO_RETRY)
    return redis.Redis(unix_socket_path=parsed.path,
                       db=int(query.get('db', '0')),
                       socket_timeout=socket_timeout, **auth, **NO_RETRY)


def is_cluster(query):
    """Whether a parsed URI query (a dict) asks for Redis Cluster."""
    value = query.get('cluster', 'false').lower()
    if value not in ('true', 'false'):
        raise ValueError('Redis URI: cluster={!r} must be true or false'
                         .format(query['cluster']))
    return value == 'true'


@functools.lru_cache(maxsize=64)
def uri_is_cluster(uri):
    # Cached: every post asks (the registry's place depends on it).
    return is_cluster(dict(parse.parse_qsl(parse.urlparse(uri).query)))


def _cluster_client(hosts, db, auth, socket_timeout):
    """A Redis Cluster client that starts from the seed nodes ``hosts``.

    redis-py follows MOVED and ASK redirections itself (the command did
    not run, so following them is always safe) and retries TRYAGAIN a few
    times; every other failure comes up to :func:`guarded` (retry=0: one
    retry policy, ours). Connecting reads the slot map, so the client is
    built inside ``guarded`` (see the driver's ``connection``)."""
    if db:
        raise ValueError('Redis Cluster URI: database {} given, but a '
                         'cluster has only database 0'.format(db))
    seeds = []
    for host in hosts.split(','):
        try:
            name, port = netutils.parse_host_port(host, 6379)
        except ValueError:
            raise ValueError('Redis Cluster URI: {!r} is not host[:port]'
                             .format(host)) from None
        if not name:
            raise ValueError('Redis Cluster URI: {!r} names no host'
                             .format(host))
        seeds.append(cluster.ClusterNode(name, port))
    return cluster.RedisCluster(
        startup_nodes=seeds, socket_timeout=socket_timeout,
        retry=retry.Retry(backoff.NoBackoff(), 0), **auth)


def on_every_master(client):
    """Keyword arguments that send a node-level command (PING, INFO) to
    every master of a cluster; none for a single server. With them a
    cluster client's INFO answers {node name: info}."""
    if isinstance(client, cluster.RedisCluster):
        return dict(target_nodes=cluster.RedisCluster.PRIMARIES)
    return {}


def _db(parsed, query):
    # ``dbid`` is the name Zaqar's own Redis URIs use.
    return int(parsed.path.strip('/') or query.get('db')
               or query.get('dbid', '0'))


def _sentinel_client(hosts, query, db, auth, socket_timeout):
    """The master that the Sentinels at ``hosts`` name for ``master``.

    redis-py asks the Sentinels for the master's address whenever it opens
    a connection, so after a failover the next connection (our retry)
    reaches the new master; a connection to a demoted master fails with a
    ConnectionError, which :func:`guarded` retries. The Lua scripts are
    loaded again on the new master when it answers NOSCRIPT (redis-py's
    Script does that, in pipelines too)."""
    sentinels = []
    for host in hosts.split(','):
        try:
            sentinels.append(netutils.parse_host_port(
                host, SENTINEL_PORT))
        except ValueError:
            raise ValueError('Redis Sentinel URI: {!r} is not host[:port]'
                             .format(host)) from None
        if not sentinels[-1][0]:
            raise ValueError('Redis Sentinel URI: {!r} names no host'
                             .format(host))
    # Queries to the Sentinels are read-only; without redis-py's retries a
    # dead Sentinel fails fast and the next one is asked.
    sentinel_kwargs = dict(socket_timeout=socket_timeout,
                           username=query.get('sentinel_username'),
                           password=query.get('sentinel_password'),
                           **NO_RETRY)
    watchers = sentinel.Sentinel(sentinels, sentinel_kwargs=sentinel_kwargs)
    return watchers.master_for(query['master'], db=db,
                               socket_timeout=socket_timeout, **auth,
                               **NO_RETRY)


# Retried: lost connections and timeouts (see guarded) and the Redis
# Cluster answers that say the command did not run, so any call may be
# retried after them: CLUSTERDOWN (a master is unreachable, or the
# cluster is failing over), TRYAGAIN left after redis-py's own tries (a
# slot is being migrated), a slot no node serves in the client's map, and
# redirections that outlasted redis-py's 16 hops ("TTL exhausted").
UNREACHABLE = (redis.exceptions.ConnectionError,
               redis.exceptions.TimeoutError)
RETRIED = UNREACHABLE + (redis.exceptions.ClusterDownError,
                         redis.exceptions.TryAgainError,
                         redis.exceptions.SlotNotCoveredError,
                         redis.exceptions.ClusterError)


def _retried(exc):
    """Other cluster client errors are our own mistakes (keys of two slots
    in one command), except when no seed node answered for the slot map."""
    return isinstance(exc, RETRIED) or isinstance(exc.__cause__, UNREACHABLE)


# How often a call waiting out a LOADING Redis tries again.
LOADING_POLL = 0.2


def _given_up(exc):
    tally.count(tally.ERROR, 'redis', exc)
    return errors.BackendUnavailable(backend='Redis', reason=exc)


# Functions of redis-py that open a connection (or hand one out of the
# pool): a failure raised under one of them came before the command was
# sent, so it did not run.
_CONNECTING = frozenset(('connect', 'connect_check_health', '_connect',
                         'connect_to', '_connect_retry', 'on_connect',
                         'on_connect_check_health', 'get_connection'))
_REDIS_PACKAGE = os.path.dirname(redis.__file__)


def maybe_ran(exc):
    """Whether the command may have run before ``exc``: a timeout or a lost
    connection after it was sent. A failure to connect, and the Cluster
    answers that say the command did not run, leave no doubt."""
    if not isinstance(exc, UNREACHABLE):
        return False
    trace = exc.__traceback__
    while trace is not None:
        code = trace.tb_frame.f_code
        if code.co_name in _CONNECTING and code.co_filename.startswith(
                _REDIS_PACKAGE):
            return False
        trace = trace.tb_next
    return True


# A script's answer when the queue's metadata generation moved under the
# call's cached policy: it ran nothing.
STALE_REPLY = 'ZDSTALE'


def is_stale(exc):
    """Whether a ResponseError is a script's STALE_REPLY, alone or as
    redis-py reports an error inside a pipeline (``replica_acks``):
    "Command # N (...) of pipeline caused error: <reply>"."""
    message = str(exc)
    return message.startswith(STALE_REPLY) or (
        ' of pipeline caused error: ' + STALE_REPLY) in message


def guarded(call, attempts, sleep, loading_wait=0.0, kept_until=None):
    """Run ``call()``; retry lost connections, then raise Zaqar's error.

    A retry after a lost reply has the effect of one call: posts carry
    their ids and skip ids that exist or were deleted lately (post.lua),
    claim and pop keep their result under the claim id for the retry span
    (claim.lua), and every other script is atomic and idempotent. While
    Redis answers LOADING (it is reading its data set back after a restart
    and runs nothing), or a Redis Cluster answers CLUSTERDOWN (a master is
    gone or still rejoining, about two node timeouts after its restart),
    the call waits up to ``loading_wait`` seconds more without using up its
    attempts: giving up then would fail a call whose lost first run may
    have taken a batch that the retry would return.

    A call that keeps its result (a claim or pop) gives ``kept_until``:
    the ``time.monotonic()`` after which a retry could arrive once its
    result is gone. Once one of its attempts timed out or lost its
    connection after sending (its outcome is in doubt: it may have taken a
    batch), it is retried, with the same backoff, until then rather than
    ``attempts`` times: answering 503 while its result is still kept
    would lose the batch it took.
    """
    attempt, loading_until, in_doubt = 0, None, False

    def out_of_time():
        if in_doubt:
            return time.monotonic() >= kept_until
        return attempt == attempts

    def back_off(exc):
        nonlocal attempt
        tally.count(tally.RETRY, 'redis', exc)
        pause = sleep * (2 ** attempt)
        if in_doubt:
            pause = max(0.0, min(pause, kept_until - time.monotonic()))
        time.sleep(pause)
        attempt += 1

    while True:
        try:
            return call()
        except (redis.exceptions.BusyLoadingError,
                redis.exceptions.ClusterDownError) as exc:
            now = time.monotonic()
            if loading_until is None:
                loading_until = now + loading_wait
                tally.count(tally.RETRY, 'redis', exc)
            wait_until = kept_until if in_doubt else loading_until
            if now < wait_until:
                time.sleep(min(LOADING_POLL, wait_until - now))
                continue
            if isinstance(exc, redis.exceptions.BusyLoadingError):
                LOG.error('Redis still loading after %.1f s: %s',
                          loading_wait, exc)
                raise _given_up(exc)
            # Still CLUSTERDOWN after the wait: retried like the rest.
            if out_of_time():
                LOG.error('Redis Cluster down after %.1f s and %d attempts: '
                          '%s', loading_wait, attempt + 1, exc)
                raise _given_up(exc)
            back_off(exc)
        except (*RETRIED, redis.exceptions.RedisClusterException) as exc:
            in_doubt = in_doubt or (kept_until is not None
                                    and maybe_ran(exc))
            if out_of_time() or not _retried(exc):
                LOG.error('Redis unavailable after %d attempts%s: %s',
                          attempt + 1, ' (outcome in doubt)' if in_doubt
                          else '', exc)
                raise _given_up(exc)
            back_off(exc)
        except redis.exceptions.ResponseError as exc:
            if is_stale(exc):
                raise metadata_copy.StaleCopy() from exc
            LOG.error('Redis refused an operation: %s', exc)
            raise _given_up(exc)
