"""Tempest's entry point into this plugin."""

import os

from tempest import config
from tempest.test_discover import plugins

from zaqar_delay_tempest_plugin import config as zd_config


class ZaqarDelayTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        here = os.path.dirname(os.path.abspath(__file__))
        return os.path.join(here, 'tests'), os.path.dirname(here)

    def register_opts(self, conf):
        config.register_opt_group(conf, zd_config.group, zd_config.ALL_OPTS)

    def get_opt_lists(self):
        return [(zd_config.GROUP_NAME, zd_config.ALL_OPTS)]
