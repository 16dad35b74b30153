"""The multi-process suite: each test names the backends it runs on
(``backend_name`` parametrized), with their sizes; ``team`` runs its
roles at once (team.py)."""

import sys

import pytest

from localstack.factories import mongodb as mongodb_factory
from tests.multiprocess import team as team_module


@pytest.fixture
def team(crew, driver, backend_name, conf, redis_url):
    """Spawned processes, each with its own driver on the test driver's
    store; on mongomock (whose fake server lives in this process)
    threads sharing the test's driver, switching often."""
    if backend_name == 'mongodb' and not mongodb_factory.real_server_uri():
        before = sys.getswitchinterval()
        sys.setswitchinterval(team_module.SWITCH_INTERVAL_S)
        yield team_module.Team(crew, driver, None)
        sys.setswitchinterval(before)
        return
    group = conf[team_module.store_group(backend_name)]
    options = {name: group[name] for name in
               ('uri', 'database', 'read_cut_index_from') if name in group}
    yield team_module.Team(crew, driver, (backend_name, options, redis_url))
