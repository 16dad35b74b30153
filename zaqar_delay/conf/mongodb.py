"""Options of the MongoDB data driver (``message_store = delay.mongodb``).

The group name follows Zaqar's ``drivers:message_store:<scheme>`` convention,
so the same options are filled in from a pool URI such as
``delay.mongodb://db1.example.org:27017``.
"""

from oslo_config import cfg

GROUP_NAME = 'drivers:message_store:delay.mongodb'

uri = cfg.StrOpt(
    'uri', default='delay.mongodb://127.0.0.1:27017', secret=True,
    help='MongoDB deployment to keep messages in, as a MongoDB connection '
         'string whose scheme is delay.mongodb:// (or delay.mongodb+srv://). '
         'The plain mongodb:// and mongodb+srv:// schemes are accepted too. '
         'Credentials and options such as replicaSet go in the URI, so keep '
         'zaqar.conf private on hosts where it holds a password.')

database = cfg.StrOpt(
    'database', default='zaqar_delay',
    help='Name of the MongoDB database that holds the messages, claims, '
         'counters and subscriptions collections of this driver.')

max_body_size = cfg.IntOpt(
    'max_body_size', default=1024 * 1024, min=1024, max=15 * 1024 * 1024,
    help='Largest message body, in bytes of its UTF-8 JSON text, that the '
         'driver stores. A larger body is refused with an error that names '
         'this limit, and nothing of the post is stored. The maximum stays '
         'below MongoDB\'s 16 MiB document limit.')

server_selection_timeout = cfg.FloatOpt(
    'server_selection_timeout', default=5.0, min=0.1, max=300.0,
    help='Seconds to wait for a usable MongoDB server before an operation '
         'fails with a storage error (Zaqar answers 503).')

socket_timeout = cfg.FloatOpt(
    'socket_timeout', default=10.0, min=0.1, max=300.0,
    help='Seconds to wait for a MongoDB reply before the operation fails '
         'with a storage error (Zaqar answers 503).')

clock_sync_interval = cfg.FloatOpt(
    'clock_sync_interval', default=10.0, min=0.0, max=300.0,
    help='How the driver tells the time: always by the MongoDB server\'s '
         'clock, so that all Zaqar nodes share one clock. With a positive '
         'number of seconds, the offset between the server clock and the '
         'local monotonic clock is measured that often (and after any '
         'MongoDB error) and added to the local clock: no request per '
         'operation, within 25 ms of the server clock plus 0.5 ms per '
         'second since the measurement at most. With 0, every operation '
         'reads the server clock (one request more).')

reservation_timeout = cfg.FloatOpt(
    'reservation_timeout', default=60.0, min=1.0, max=3600.0,
    help='Seconds for which the positions a post (or a dead letter, or a '
         'group move) has reserved hold back persistent consumers and '
         'read-by-all cleanup while it stores its messages, so that a '
         'consumer never moves past a message still being stored. A post '
         'that died meanwhile holds them back this long at most; a group '
         'move whose mover died, until gc finishes it (600 s after the '
         'move started) and this long beside. A post '
         'still storing after this long (a stalled API process, or an '
         'insert the server runs after the driver gave up waiting for '
         'it) may store messages behind a persistent consumer\'s cursor: '
         'that consumer never gets them, they are not counted as lost, '
         'and read-by-all cleanup may remove them unread. Keep it well '
         'above socket_timeout.')

ALL_OPTS = [uri, database, max_body_size, server_selection_timeout,
            socket_timeout, clock_sync_interval, reservation_timeout]
