"""Options of the Redis data driver (``message_store = delay.redis``).

The group name follows Zaqar's ``drivers:message_store:<scheme>`` convention,
so the same options are filled in from a pool URI such as
``delay.redis://127.0.0.1:6379/0``.
"""

from oslo_config import cfg

GROUP_NAME = 'drivers:message_store:delay.redis'

uri = cfg.StrOpt(
    'uri', default='delay.redis://127.0.0.1:6379/0', secret=True,
    help='Redis server to keep messages in, as '
         'delay.redis://[:password@]host[:port][/db] or '
         'delay.redis:///path/to/redis.sock[?db=N]; or, with Redis Sentinel, '
         'delay.redis://[:password@]host1[:port],host2[:port][/db]'
         '?master=NAME, which lists Sentinels (port 26379 by default) that '
         'watch the master called NAME, adds sentinel_username and '
         'sentinel_password to the query when the Sentinels need them, and '
         'follows a failover without a restart; or, with Redis Cluster, '
         'delay.redis://[:password@]host1[:port][,host2[:port],...]'
         '?cluster=true, which lists seed nodes of the cluster (any one '
         'that answers suffices; database 0 only). The plain redis:// '
         'scheme is accepted too. Put passwords in the URI only on hosts '
         'where zaqar.conf is private.')

socket_timeout = cfg.FloatOpt(
    'socket_timeout', default=5.0, min=0.1,
    help='Seconds to wait for a Redis reply before the operation fails with '
         'a storage error (Zaqar answers 503).')

max_reconnect_attempts = cfg.IntOpt(
    'max_reconnect_attempts', default=3, min=0, max=20,
    help='How many times an operation is retried after a lost connection '
         'or a timeout before it fails. This is the only retry: redis-py\'s '
         'own retries are turned off. A retried operation has the effect of '
         'one: a claim or pop keeps its result for the whole retry span '
         '((attempts + 1) x socket_timeout plus the reconnect sleeps plus '
         'loading_wait plus 10 s), and a post skips ids that exist or that '
         'were deleted within deleted_id_memory. A claim or pop whose '
         'outcome is in doubt (a timeout, or a connection lost after it was '
         'sent: it may have taken its batch) is retried, with the same '
         'sleeps, until its kept result would be gone (the retry span less '
         '10 s and one socket_timeout: 31.4 s with the defaults) rather '
         'than this many times, so that it does not answer 503 for a batch '
         'it took.')

reconnect_sleep = cfg.FloatOpt(
    'reconnect_sleep', default=0.2, min=0.0, max=10.0,
    help='Seconds to sleep before the first reconnect attempt; doubled on '
         'each further attempt.')

loading_wait = cfg.FloatOpt(
    'loading_wait', default=15.0, min=0.0, max=600.0,
    help='Seconds an operation keeps waiting, beyond its reconnect '
         'attempts, for a Redis that answers LOADING while it reads its '
         'data set back after a restart (it runs no command meanwhile). '
         'Without this wait, a pop whose reply was lost just before the '
         'restart would fail with a 503 after its messages were taken; '
         'with it, the retry gets the batch once Redis is back. It is part '
         'of the retry span ((max_reconnect_attempts + 1) x socket_timeout '
         '+ the reconnect sleeps + loading_wait + 10 s), which must stay '
         'below 60 s, Zaqar\'s shortest message ttl (the driver logs a '
         'warning otherwise): 46.4 s with the defaults.')

deleted_id_memory = cfg.IntOpt(
    'deleted_id_memory', default=900, min=60, max=86400,
    help='Seconds the ids of deleted (acknowledged, popped) messages are '
         'remembered per queue, so that a post retried after a lost reply, '
         'or a dead letter or moved group that gc copies again after its '
         'node died, cannot store a message its consumer already deleted. '
         'Keep it above the retry span and above the time zaqar-delay-gc '
         'takes to come round (its interval plus one minute); it costs '
         'about 140 bytes of Redis memory per message deleted within it.')

replica_acks = cfg.IntOpt(
    'replica_acks', default=0, min=0, max=16,
    help='With replicas (for example under Redis Sentinel): how many of '
         'them must have received every write of an operation before it is '
         'acknowledged (Redis WAIT, sent in the same round trip). 0 '
         'acknowledges once the master has it: replication is asynchronous, '
         'so a failover can lose the last writes acknowledged before the '
         'master died (posts, deletions, claims). With 1 or more, a write '
         'that the replicas do not confirm within replica_ack_timeout is '
         'still acknowledged, with a warning in the log: this narrows the '
         'loss window, it does not close it.')

replica_ack_timeout = cfg.FloatOpt(
    'replica_ack_timeout', default=1.0, min=0.01, max=60.0,
    help='Seconds an operation waits for replica_acks replicas to confirm '
         'its writes. Must be below socket_timeout.')

ALL_OPTS = [uri, socket_timeout, max_reconnect_attempts, reconnect_sleep,
            loading_wait, deleted_id_memory, replica_acks,
            replica_ack_timeout]
