"""Which queues to move: Zaqar's queue controller (the management store,
which the switch leaves as it is) lists each project's queues.

Zaqar has no call that lists projects, so without ``--project-id`` they
are read from the management store's own index: the Redis one keeps a
``<project>.queues_set`` per project, the MongoDB one a ``p_q``
("<project>/<queue>") per queue, the SQL one (which pooling needs) a
``project`` column in its ``Queues`` table. Another management store
needs ``--project-id``.
"""

import sqlalchemy as sa
from zaqar.storage.mongodb import queues as mongo_queues
from zaqar.storage.redis import queues as redis_queues
from zaqar.storage.sqlalchemy import queues as sql_queues
from zaqar.storage.sqlalchemy import tables as sql_tables

from zaqar_delay import errors

PAGE = 100
_REDIS_QSET_SUFFIX = '.' + redis_queues.QUEUES_SET_STORE_NAME


def selected(control, projects=(), names=()):
    """(project, queue) of every queue to move, project by project."""
    for project in projects or all_projects(control):
        for queue in queues_of(control, project):
            if not names or queue in names:
                yield project, queue


def queues_of(control, project):
    marker = None
    while True:
        pages = control.queue_controller.list(project=project, marker=marker,
                                              limit=PAGE)
        page = [queue['name'] for queue in next(pages)]
        marker = next(pages)
        yield from page
        if len(page) < PAGE:
            return


def all_projects(control):
    """Every project that has queues, sorted; None is Zaqar's global
    project (no project id)."""
    queues = control.queue_controller
    if isinstance(queues, redis_queues.QueueController):
        found = {key.decode()[:-len(_REDIS_QSET_SUFFIX)]
                 for key in queues._client.scan_iter(
                     match='*' + _REDIS_QSET_SUFFIX)}
    elif isinstance(queues, mongo_queues.QueueController):
        found = set(_mongo_projects(queues._collection))
    elif isinstance(queues, sql_queues.QueueController):
        found = {row[0] for row in queues.driver.fetch_all(
            sa.sql.select(sql_tables.Queues.c.project).distinct())}
    else:
        raise errors.InvalidInput(
            'cannot list the projects of a {} management store: name '
            'them with --project-id'.format(type(queues).__module__))
    return sorted((project or None for project in found),
                  key=lambda project: project or '')


def _mongo_projects(collection):
    """Zaqar's ``p_q`` ("<project>/<queue>", indexed) holds the project:
    one indexed lookup per project, each for the first name past the one
    before ('0' sorts right after '/'), rather than a distinct() of every
    queue, which MongoDB answers in one document of at most 16 MB."""
    after = ''
    while True:
        first = collection.find_one({'p_q': {'$gte': after}},
                                    {'p_q': True, '_id': False},
                                    sort=[('p_q', 1)])
        if first is None:
            return
        project = first['p_q'].split('/', 1)[0]
        yield project
        after = project + '0'
