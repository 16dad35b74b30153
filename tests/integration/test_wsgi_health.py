"""README: an operator sees through ``GET /v2/health`` (admin, with Zaqar's
``admin_mode``) whether Redis keeps an append-only file."""

import pytest
import requests

ADMIN_MODE = '[DEFAULT]\nadmin_mode = true\n'


@pytest.mark.parametrize('operator_config', [ADMIN_MODE])
@pytest.mark.parametrize('backend_name', ['redis'])
def test_the_health_endpoint_reports_redis_persistence(zaqar_url, project):
    headers = {'X-Project-ID': project,
               'Client-ID': '3381af92-2b9e-11e3-b191-71861300734c'}
    reply = requests.get(zaqar_url + '/v2/health', timeout=30,
                         headers=dict(headers, **{'X-Roles': 'admin'}))
    assert reply.status_code == 200, reply.text
    health = reply.json()
    assert health['storage_reachable'] is True
    # The test redis-server runs without AOF.
    assert health['persistence']['aof_enabled'] is False
    assert 'AOF' in health['persistence']['warning']
    # Not for tenants.
    reply = requests.get(zaqar_url + '/v2/health', headers=headers,
                         timeout=30)
    assert reply.status_code == 403
