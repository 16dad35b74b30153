"""Options of the Swift data driver (``message_store = delay.swift``).

The group name follows Zaqar's ``drivers:message_store:<scheme>`` convention,
so the same options are filled in from a pool URI. Two URI forms exist (see
docs/swift.md):

* Keystone: ``delay.swift://<user>:<password>@/<project>`` plus ``auth_url``
  and the domain options below, as Zaqar's own Swift driver does.
* Swift tempauth / v1 auth, for small setups and tests:
  ``delay.swift://<account>%3A<user>:<key>@<host>:<port>/auth/v1.0?auth=v1``.
"""

from oslo_config import cfg

GROUP_NAME = 'drivers:message_store:delay.swift'

uri = cfg.StrOpt(
    'uri', default='delay.swift://zaqar:secret@/service', secret=True,
    help='Swift account to keep messages in. With Keystone: '
         'delay.swift://USER:PASSWORD@/PROJECT, authenticated at auth_url. '
         'With Swift v1 (tempauth, swauth): '
         'delay.swift://ACCOUNT%3AUSER:KEY@HOST:PORT/auth/v1.0?auth=v1, '
         'where %3A is the percent-encoded colon between the account and the '
         'user; add tls=1 to the query to use https. A query flag '
         'auth=v1 or auth=keystone overrides the auth_system option. Put '
         'secrets in the URI only on hosts where zaqar.conf is private.')

auth_system = cfg.StrOpt(
    'auth_system', default='keystone', choices=('keystone', 'v1'),
    help='How the driver authenticates to Swift when the URI has no auth '
         'query flag: keystone (a keystoneauth session, as Zaqar\'s own '
         'Swift driver) or v1 (Swift\'s tempauth-style X-Auth-User and '
         'X-Auth-Key, for small setups and tests).')

auth_url = cfg.StrOpt(
    'auth_url', default='http://127.0.0.1:5000/v3/',
    help='Keystone endpoint used to authenticate and to find Swift in the '
         'service catalogue. Ignored with v1 auth.')

insecure = cfg.BoolOpt(
    'insecure', default=False,
    help='Skip the TLS certificate check of Keystone and Swift. Use only on '
         'test deployments.')

project_domain_id = cfg.StrOpt(
    'project_domain_id',
    help='Keystone id of the domain that holds the project of the URI.')

project_domain_name = cfg.StrOpt(
    'project_domain_name', default='Default',
    help='Keystone name of the domain that holds the project of the URI.')

user_domain_id = cfg.StrOpt(
    'user_domain_id',
    help='Keystone id of the domain that holds the user of the URI.')

user_domain_name = cfg.StrOpt(
    'user_domain_name', default='Default',
    help='Keystone name of the domain that holds the user of the URI.')

region_name = cfg.StrOpt(
    'region_name',
    help='Region whose object-store endpoint is used; unset picks the only '
         'one.')

interface = cfg.StrOpt(
    'interface', default='public', choices=('public', 'internal', 'admin'),
    help='Which catalogue endpoint of the object store to use.')

timeout = cfg.FloatOpt(
    'timeout', default=10.0, min=0.1,
    help='Seconds to wait for a Swift reply before the request is retried '
         'or the operation fails with a storage error (Zaqar answers 503).')

retries = cfg.IntOpt(
    'retries', default=3, min=0, max=20,
    help='How many times a failed Swift request (lost connection, 5xx) is '
         'retried with backoff. Conditional PUTs stay safe when retried: a '
         '412 answer to a retry is checked against what this driver wrote.')

max_parallel_requests = cfg.IntOpt(
    'max_parallel_requests', default=8, min=1, max=64,
    help='How many Swift requests one operation may have in flight at once '
         '(for example the per-message requests of a claim of ten messages). '
         'The operations of an API worker share a pool of twice this many '
         'threads, one connection to Swift each, so that one slow operation '
         'leaves room for the others. A step of a call takes one round of '
         'requests per this many messages of its batch: where each Swift '
         'request waits tens of milliseconds (network, object servers\' '
         'disks), set it to at least the largest batch clients post or '
         'claim.')

expiry_margin = cfg.IntOpt(
    'expiry_margin', default=300, min=0, max=86400,
    help='Seconds added to an expiry before Swift\'s own X-Delete-At '
         'removes an object that carries one (a pop\'s outcome, a released '
         'claim\'s marker, the marker of a message copied in). The driver '
         'decides expiry with its own clock; the margin keeps clock skew '
         'between the API nodes and Swift from deleting such an object '
         'early. Messages and their positions carry none: gc removes them.')

create_settle_time = cfg.FloatOpt(
    'create_settle_time', default=0.05, min=0.0, max=5.0,
    help='Seconds a node waits, after creating a claim lock, a message '
         'position or a subscriber record with If-None-Match, before it reads '
         'the object back to learn whether its write is the one that stayed. '
         'Swift does not lock objects, so PUTs that overlap in flight can all '
         'pass If-None-Match; the longer this wait, the smaller the window '
         'in which two nodes can both believe they won (see docs/swift.md). '
         'It adds this much latency to each claim and each post.')

read_cut_index_from = cfg.IntOpt(
    'read_cut_index_from', default=100, min=0, max=10000,
    help='Persistent consumers a queue with retention consumers_required '
         'may have (counted by their stored states and subscriptions) '
         'before its read-by-all cut stops listing all of them on each '
         'claim, pop and listing and walks its cursor index instead: a few '
         'listings from the lowest cursor, the same whatever the number of '
         'consumers. Below it, one listing of each, of up to this many '
         'entries, costs less than the walk.')

ALL_OPTS = [uri, auth_system, auth_url, insecure, project_domain_id,
            project_domain_name, user_domain_id, user_domain_name,
            region_name, interface, timeout, retries, max_parallel_requests,
            expiry_margin, create_settle_time, read_cut_index_from]
