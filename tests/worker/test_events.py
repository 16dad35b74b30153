"""Validation that needs no server: names, envelopes, settings."""

import dataclasses

import pytest

from zaqar_delay.worker import App
from zaqar_delay.worker import events
from zaqar_delay.worker import handlers
from zaqar_delay.worker import Settings


@dataclasses.dataclass
class PaymentCheck:
    order: int


class Renamed:
    event_type = 'Custom_1'


def test_type_names_come_from_classes_or_strings():
    assert events.type_name(PaymentCheck) == 'PaymentCheck'
    assert events.type_name(Renamed) == 'Custom_1'
    assert events.type_name('Tick') == 'Tick'


@pytest.mark.parametrize('bad', ['', 'a.b', 'a-b', 'ü', 7, None, 'Tick\n'])
def test_bad_type_names_are_refused_with_the_value(bad):
    with pytest.raises(events.EventError, match='event type') as info:
        events.type_name(bad)
    assert repr(bad) in str(info.value)


def test_queue_names_fit_zaqar_with_room_for_the_dead_letter_suffix():
    assert events.queue_name('shop-', 'Tick') == 'shop-Tick'
    assert events.dead_letter_queue('shop-Tick') == 'shop-Tick-dead'
    events.queue_name('', 'x' * 59)
    with pytest.raises(events.EventError, match='at most 59'):
        events.queue_name('', 'x' * 60)
    for bad_prefix in ('a.b', 'shop-\n'):
        with pytest.raises(events.EventError, match='prefix'):
            events.check_prefix(bad_prefix)


def test_envelope_refuses_what_json_cannot_carry():
    body = events.envelope('T', {'a': 1}, {'k': 'v'}, 5.0)
    assert events.is_envelope(body)
    with pytest.raises(events.EventError, match='JSON'):
        events.envelope('T', {'a': object()}, None, 5.0)
    with pytest.raises(events.EventError, match='context'):
        events.envelope('T', 1, {1: 'x'}, 5.0)
    with pytest.raises(events.EventError, match='JSON'):
        events.envelope('T', float('nan'), None, 5.0)


def test_dataclass_events_round_trip():
    name, data = events.to_data(PaymentCheck(7))
    assert (name, data) == ('PaymentCheck', {'order': 7})
    assert events.decode(PaymentCheck, data) == PaymentCheck(7)
    assert events.decode('PaymentCheck', data) == {'order': 7}


def test_the_defaults_docs_worker_md_states():
    # docs/worker.md, "Settings and defaults".
    defaults = Settings()
    assert dataclasses.asdict(defaults) == {
        'poll_interval': 1.0, 'batch_size': 10, 'claim_ttl': 60,
        'claim_grace': 60, 'claim_renew_interval': None, 'max_attempts': 3,
        'retry_delay': 10, 'event_ttl': 3 * 86400,
        'dead_letter_ttl': 7 * 86400, 'close_timeout': 30.0,
        'stats_interval': 10.0}
    assert defaults.renew_interval == 30


def test_a_delay_leaving_an_event_no_minute_after_due_is_refused():
    # docs/worker.md: a delay over 14 days less a minute is refused, here,
    # before anything is sent (the URL answers nothing).
    app = App('http://127.0.0.1:9', project='p')
    with pytest.raises(ValueError, match=r'delay must be an integer from '
                       r'0 to 1209540; got 1209541'):
        app.enqueue({'n': 1}, type='Late', delay=14 * 86400 - 59)
    assert app.counts.snapshot('Late') == {}


@pytest.mark.parametrize('field, value, bound', [
    ('batch_size', 0, '1 to 20'), ('batch_size', 21, '1 to 20'),
    ('claim_ttl', 59, '60 to'), ('claim_grace', 10, '60 to'),
    ('max_attempts', True, '1 to 1000'), ('retry_delay', -1, '0 to'),
    ('poll_interval', 0, '0.01 to 3600'), ('event_ttl', 1.5, '60 to'),
    ('claim_renew_interval', 60, '0.1 to 59'),
])
def test_bad_settings_name_field_value_and_bound(field, value, bound):
    with pytest.raises(ValueError) as info:
        Settings(**{field: value})
    message = str(info.value)
    assert field in message and repr(value) in message and bound in message


def test_handler_checks_its_arguments():
    with pytest.raises(ValueError, match='parallelism'):
        handlers.Handler('T', print, parallelism=0)
    with pytest.raises(TypeError, match='callable'):
        handlers.Handler('T', 'not a function')


def test_a_foreign_body_fails_the_attempt():
    handler = handlers.Handler('T', lambda event: None)
    with pytest.raises(events.EventError, match='not a T event'):
        handler.invoke('m1', 'T', {'hello': 'world'})
