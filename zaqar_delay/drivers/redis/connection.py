"""Redis client construction and the one place Redis faults are handled."""

import time
from urllib import parse

import redis
from oslo_log import log as logging
from redis import backoff
from redis import retry

from zaqar_delay import errors

LOG = logging.getLogger(__name__)

SCHEMES = ('delay.redis', 'redis')


# redis-py (5.x and later) retries failed commands by default. A retry
# below :func:`guarded` would re-run a script whose first run completed but
# whose reply was lost, behind the back of the token that makes the retry
# safe, so there is exactly one retry policy: ours.
NO_RETRY = dict(retry=retry.Retry(backoff.NoBackoff(), 0),
                retry_on_error=[])


def client_from_uri(uri, socket_timeout):
    """A redis-py client for ``delay.redis://`` (or ``redis://``) URIs,
    with redis-py's own retries off."""
    parsed = parse.urlparse(uri)
    if parsed.scheme not in SCHEMES:
        raise ValueError('Redis URI must start with delay.redis:// or '
                         'redis://; got {!r}'.format(parsed.scheme))
    query = parse.parse_qs(parsed.query)
    password = parse.unquote(parsed.password) if parsed.password else None
    username = parse.unquote(parsed.username) if parsed.username else None
    if parsed.hostname:
        db = int(parsed.path.strip('/') or query.get('db', ['0'])[0])
        return redis.Redis(host=parsed.hostname, port=parsed.port or 6379,
                           db=db, username=username, password=password,
                           socket_timeout=socket_timeout, **NO_RETRY)
    return redis.Redis(unix_socket_path=parsed.path,
                       db=int(query.get('db', ['0'])[0]), username=username,
                       password=password, socket_timeout=socket_timeout,
                       **NO_RETRY)


# How often a call waiting out a LOADING Redis tries again.
LOADING_POLL = 0.2


def guarded(call, attempts, sleep, loading_wait=0.0):
    """Run ``call()``; retry lost connections, then raise Zaqar's error.

    A retry after a lost reply has the effect of one call: posts carry
    their ids and skip ids that exist or were deleted lately (post.lua),
    claim and pop keep their result under the claim id for the retry span
    (claim.lua), and every other script is atomic and idempotent. While
    Redis answers LOADING (it is reading its data set back after a restart
    and runs nothing), the call waits up to ``loading_wait`` seconds more
    without using up its attempts: giving up then would fail a call whose
    lost first run may have taken a batch that the retry would return.
    """
    attempt, loading_until = 0, None
    while True:
        try:
            return call()
        except redis.exceptions.BusyLoadingError as exc:
            now = time.monotonic()
            if loading_until is None:
                loading_until = now + loading_wait
            if now < loading_until:
                time.sleep(min(LOADING_POLL, loading_until - now))
                continue
            LOG.error('Redis still loading after %.1f s: %s', loading_wait,
                      exc)
            raise errors.BackendUnavailable(backend='Redis', reason=exc)
        except (redis.exceptions.ConnectionError,
                redis.exceptions.TimeoutError) as exc:
            if attempt == attempts:
                LOG.error('Redis unreachable after %d attempts: %s',
                          attempts + 1, exc)
                raise errors.BackendUnavailable(backend='Redis', reason=exc)
            time.sleep(sleep * (2 ** attempt))
            attempt += 1
        except redis.exceptions.ResponseError as exc:
            LOG.error('Redis refused an operation: %s', exc)
            raise errors.BackendUnavailable(backend='Redis', reason=exc)
