"""Which projects zaqar-delay-migrate visits when no --project-id names
them: every project of the management store."""

from localstack import backends
from localstack.factories import mongodb as mongodb_factory
from zaqar_delay.migrate import queues

# A project whose name another one starts with, before and after '/' in
# the order of the names: the walk must step over neither.
PROJECTS = ['proj', 'proj-x', 'proj0', 'a', 'z' * 64]


def test_every_project_of_a_mongodb_management_store(monkeypatch):
    from zaqar.storage.mongodb import driver
    client = mongodb_factory.StandaloneView(
        mongodb_factory.mongomock_client_factory()(None))
    monkeypatch.setattr(driver, '_connection', lambda conf: client)
    conf = backends.make_conf(**{
        'drivers:management_store:mongodb': {
            'uri': 'mongodb://127.0.0.1:27017',
            'database': 'zaqar_projects'}})
    conf.set_override('unreliable', True)
    control = driver.ControlDriver(conf, None)
    for project in PROJECTS:
        for name in ('q1', 'q2'):
            control.queue_controller.create(name, project=project)
    control.queue_controller.create('global')
    assert queues.all_projects(control) == [None] + sorted(PROJECTS)
