"""Redis client construction and the one place Redis faults are handled."""

import time
from urllib import parse

import redis
from oslo_log import log as logging

from zaqar_delay import errors

LOG = logging.getLogger(__name__)

SCHEMES = ('delay.redis', 'redis')


def client_from_uri(uri, socket_timeout):
    """A redis-py client for ``delay.redis://`` (or ``redis://``) URIs."""
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
                           socket_timeout=socket_timeout)
    return redis.Redis(unix_socket_path=parsed.path,
                       db=int(query.get('db', ['0'])[0]), username=username,
                       password=password, socket_timeout=socket_timeout)


def guarded(call, attempts, sleep):
    """Run ``call()``; retry lost connections, then raise Zaqar's error.

    Every caller is idempotent (posts carry their ids, scripts are atomic),
    so a retry after a lost reply cannot duplicate or lose a message.
    """
    for attempt in range(attempts + 1):
        try:
            return call()
        except (redis.exceptions.ConnectionError,
                redis.exceptions.TimeoutError) as exc:
            if attempt == attempts:
                LOG.error('Redis unreachable after %d attempts: %s',
                          attempts + 1, exc)
                raise errors.BackendUnavailable(backend='Redis', reason=exc)
            time.sleep(sleep * (2 ** attempt))
        except redis.exceptions.ResponseError as exc:
            LOG.error('Redis refused an operation: %s', exc)
            raise errors.BackendUnavailable(backend='Redis', reason=exc)
