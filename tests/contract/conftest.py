"""The contract suite runs on every backend and on a Redis Cluster too."""

import pytest

from localstack import factories

CONTRACT_BACKENDS = factories.BACKENDS + ('redis_cluster',)


@pytest.fixture(params=CONTRACT_BACKENDS)
def backend_name(request):
    return request.param
