"""The test Swift with Keystone auth (``SwiftServer(keystone=...)``)
against a real Keystone: a project member owns account KEY_<project id>,
another project's member is refused there, and tempauth keeps working
on the same proxy."""

import os
import uuid

import pytest
import swiftclient
from keystoneauth1 import session
from keystoneauth1.identity import generic

from localstack import swift_server

pytestmark = [pytest.mark.integration, pytest.mark.keystone]

PASSWORD = 'swift-keystone-test'


@pytest.fixture
def swift(keystone_swift):
    return keystone_swift


def member_connection(keystone, name, storage_url=None):
    """swiftclient as a new project's member ``name``, at its own
    account from the catalog unless ``storage_url`` names another."""
    keystone.create_member(name, PASSWORD)
    auth = session.Session(auth=generic.Password(
        auth_url=keystone.url, username=name, password=PASSWORD,
        project_name=name, user_domain_id='default',
        project_domain_id='default'))
    url = storage_url or auth.get_endpoint(service_type='object-store',
                                           interface='public')
    return swiftclient.Connection(session=auth, retries=0, os_options={
        'object_storage_url': url})


def test_a_member_owns_its_account_beside_tempauth(keystone, swift):
    owner = member_connection(keystone, 'owner-' + uuid.uuid4().hex[:8])
    assert owner.url.startswith(swift.url + '/v1/KEY_')
    owner.put_container('c')
    owner.put_object('c', 'o', b'by keystone')
    assert owner.get_object('c', 'o')[1] == b'by keystone'

    tempauth = swiftclient.Connection(**swift.credentials)
    tempauth.put_container('c')
    tempauth.put_object('c', 'o', b'by tempauth')
    assert tempauth.get_object('c', 'o')[1] == b'by tempauth'
    assert owner.get_object('c', 'o')[1] == b'by keystone'


def test_another_projects_member_is_refused(keystone, swift):
    owner = member_connection(keystone, 'owner-' + uuid.uuid4().hex[:8])
    owner.put_container('private')
    stranger = member_connection(keystone,
                                 'stranger-' + uuid.uuid4().hex[:8],
                                 storage_url=owner.url)
    with pytest.raises(swiftclient.ClientException) as refused:
        stranger.get_container('private')
    assert refused.value.http_status == 403


def test_a_python_without_keystonemiddleware_is_named(tmp_path):
    python = tmp_path / 'python3'
    python.write_text('#!/bin/sh\nexit 1\n')   # imports nothing
    os.chmod(python, 0o755)
    missing = swift_server.missing_swift_binaries(python=str(python),
                                                  keystone=True)
    assert swift_server.KEYSTONE_MIDDLEWARE in missing
    assert swift_server.KEYSTONE_MIDDLEWARE not in \
        swift_server.missing_swift_binaries(python=str(python))
    with pytest.raises(swift_server.SwiftUnavailable,
                       match='python3-keystonemiddleware: scripts/setup.sh'):
        swift_server.ensure_swift_installed(python=str(python),
                                            keystone=True)
