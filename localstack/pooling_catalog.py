"""Zaqar's pooling catalogue in this process, as ``zaqar-server`` builds it.

Queue metadata, pools and the catalogue live in Zaqar's sqlalchemy
management store on sqlite; ``Catalog.get_driver`` builds each pool's data
driver through ``storage.utils.dynamic_conf`` on one shared configuration,
exactly as Zaqar does for a request. Our option groups are not registered
beforehand: in ``zaqar-server`` nothing of ours is loaded before the first
pool's driver.
"""

import os

from oslo_config import cfg
from oslo_log import log
from osprofiler import opts as profiler_opts
from zaqar import conf as zaqar_conf
from zaqar.common import cache as zaqar_cache
from zaqar.storage import pooling
from zaqar.storage.sqlalchemy import driver as sqlalchemy_driver
from zaqar.storage.sqlalchemy import tables


def delay_uri(url):
    return url.replace('redis://', 'delay.redis://')


def pooled_conf(message_store):
    conf = cfg.ConfigOpts()
    zaqar_conf.configure(conf)
    log.register_options(conf)
    profiler_opts.set_defaults(conf)
    zaqar_cache.register_config(conf)
    conf([], project='zaqar')
    conf.set_override('pooling', True)
    conf.set_override('message_store', message_store, group='drivers')
    conf.set_override('management_store', 'sqlalchemy', group='drivers')
    return conf


def make_catalog(directory, message_store):
    """(conf, control driver, catalogue) on a fresh sqlite database."""
    conf = pooled_conf(message_store)
    conf.set_override(
        'uri', 'sqlite:///' + os.path.join(str(directory), 'zaqar.db'),
        group='drivers:management_store:sqlalchemy')
    control = sqlalchemy_driver.ControlDriver(conf, None)
    tables.metadata.create_all(control.engine)
    return conf, control, pooling.Catalog(conf, zaqar_cache.get_cache(conf),
                                          control)


def place(control, queue, project, pool, metadata=None):
    """Create ``queue`` and file it under ``pool`` in the catalogue."""
    control.catalogue_controller.insert(project, queue, pool)
    control.queue_controller.create(queue, metadata=metadata or {},
                                    project=project)


POOLED_CONFIG = """[DEFAULT]
pooling = true

[drivers]
message_store = {message_store}
management_store = sqlalchemy

[drivers:management_store:sqlalchemy]
uri = sqlite:///{database}
"""


def pooled_config(directory, message_store='delay.redis'):
    """(zaqar.conf path, control driver, catalogue) of a pooled Zaqar
    whose management store is a fresh sqlite database in ``directory``,
    for an operator command to read."""
    conf, control, catalog = make_catalog(directory, message_store)
    path = directory / 'zaqar.conf'
    path.write_text(POOLED_CONFIG.format(
        message_store=message_store, database=directory / 'zaqar.db'))
    return str(path), control, catalog
