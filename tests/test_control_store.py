"""zaqar_delay.control_store.reached, for both clients Zaqar's control
drivers use (docs/reliability.md, "Every store fault is a 503"): an
outage becomes a storage error (Zaqar: 503); any other error stays what
it is (Zaqar: 500). tests/redis/test_control_store_faults.py shows it on
a live control Redis."""

import pymongo.errors
import pytest
import redis.exceptions

from zaqar_delay import control_store
from zaqar_delay import errors


@pytest.mark.parametrize('outage', [
    pymongo.errors.AutoReconnect('primary gone'),
    pymongo.errors.NotPrimaryError('stepped down'),
    pymongo.errors.NetworkTimeout('slow'),
    pymongo.errors.ServerSelectionTimeoutError('no primary'),
    redis.exceptions.ConnectionError('refused'),
    redis.exceptions.BusyLoadingError('LOADING'),
    redis.exceptions.TimeoutError('stalled'),
    redis.exceptions.ReadOnlyError('READONLY'),
], ids=lambda exc: type(exc).__name__)
def test_an_outage_of_the_control_store_is_a_storage_error(outage):
    with pytest.raises(errors.BackendUnavailable) as raised:
        with control_store.reached():
            raise outage
    assert raised.value.__cause__ is outage


@pytest.mark.parametrize('refusal', [
    pymongo.errors.OperationFailure('not authorized'),
    pymongo.errors.DuplicateKeyError('E11000'),
    redis.exceptions.ResponseError('WRONGTYPE'),
], ids=lambda exc: type(exc).__name__)
def test_any_other_error_of_the_control_store_stays_as_it_is(refusal):
    with pytest.raises(type(refusal)) as raised:
        with control_store.reached():
            raise refusal
    assert raised.value is refusal
