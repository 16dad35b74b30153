"""Console scripts."""

from oslo_config import cfg
from oslo_log import log as logging
from zaqar import bootstrap


def store_command(argv, prog, add_parsers):
    """(the chosen sub-command, Zaqar's data driver) of an operator
    command with sub-commands that reads ``zaqar.conf`` as Zaqar does."""
    conf = cfg.ConfigOpts()
    conf.register_cli_opt(cfg.SubCommandOpt(
        'action', handler=add_parsers, help='What to do.'))
    logging.register_options(conf)
    conf(argv, project='zaqar', prog=prog)
    logging.setup(conf, prog)
    return conf.action, bootstrap.Bootstrap(conf).storage._storage
