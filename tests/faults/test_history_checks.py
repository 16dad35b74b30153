"""The history checker on hand-written histories: it finds each kind of
violation, and a legal history (however its calls overlap) passes."""

from tests.faults import history


def post(tag, t0, delay=0, group=None, n=None, outcome='ok', q='q'):
    message = {'t': tag, 'q': q, 'd': delay}
    if group is not None:
        message.update(g=group, n=n)
    return {'op': 'post', 'q': q, 't0': t0, 't1': t0 + 0.01,
            'outcome': outcome, 'msgs': [message],
            'ids': ['id-' + tag] if outcome == 'ok' else None}


def claim(tag, t0, ttl=2, claim_id='c', t1=None, q='q'):
    return {'op': 'claim', 'q': q, 't0': t0, 't1': t1 or t0 + 0.01,
            'outcome': 'ok', 'ttl': ttl, 'claim': claim_id,
            'msgs': [{'id': 'id-' + tag, 't': tag}]}


def pop(tag, t0, q='q'):
    return {'op': 'pop', 'q': q, 't0': t0, 't1': t0 + 0.01,
            'outcome': 'ok', 'msgs': [{'id': 'id-' + tag, 't': tag}]}


def delete(tag, t0, outcome='ok', claim_id='c', q='q'):
    return {'op': 'delete', 'q': q, 't0': t0, 't1': t0 + 0.01,
            'outcome': outcome, 'id': 'id-' + tag, 'tag': tag,
            'claim': claim_id}


def violations(records):
    return history.check(records)['violations']


def test_a_legal_history_passes():
    assert violations([
        post('a', 0), claim('a', 1, claim_id='c1'),
        # c1 expired unacknowledged; a second claim after its ttl is fine
        claim('a', 3.01, claim_id='c2'), delete('a', 3.1, claim_id='c2'),
        post('b', 0, delay=2), pop('b', 2.0),
        # a failed post that nobody saw is not a lost message
        post('c', 0, outcome='error'),
    ]) == {}


def test_an_acknowledged_message_never_consumed_is_lost():
    assert violations([post('a', 0)]) == {'lost': 1}
    # handed out, but its claim expired and nothing consumed it
    assert violations([post('a', 0), claim('a', 1)]) == {'lost': 1}
    # a refused delete did not consume it
    assert violations([post('a', 0), claim('a', 1),
                       delete('a', 1.1, outcome='refused')]) == {'lost': 1}
    # a message from a failed post that was handed out exists: same rule
    assert violations([post('a', 0, outcome='error'),
                       claim('a', 1)]) == {'lost': 1}


def test_two_claims_that_no_order_allows_are_found():
    found = violations([post('a', 0), claim('a', 1, claim_id='c1'),
                        claim('a', 2.5, claim_id='c2'),
                        delete('a', 2.6, claim_id='c2')])
    assert found == {'two_live_claims': 1}


def test_a_claim_that_may_have_executed_late_is_not_blamed():
    # c1 returned at 2.2: it may have executed then, so c2 at 4.3 is fine
    assert violations([post('a', 0), claim('a', 1, t1=2.2, claim_id='c1'),
                       claim('a', 3.0, t1=4.3, claim_id='c2'),
                       delete('a', 4.4, claim_id='c2')]) == {}


def test_a_hand_out_after_a_pop_or_a_delete_is_found():
    assert violations([post('a', 0), pop('a', 1), claim('a', 5),
                       delete('a', 5.1)]) == {'after_deletion': 1,
                                              'two_live_claims': 1}
    assert violations([post('a', 0), claim('a', 1, claim_id='c1'),
                       delete('a', 1.1, claim_id='c1'),
                       claim('a', 9, claim_id='c2'),
                       delete('a', 9.1, claim_id='c2')]) == {
        'after_deletion': 1}


def test_a_delete_after_its_claim_may_have_ended_proves_no_deletion():
    # c1 (ttl 2, sent at 1) may have ended at 3.0, before the delete ran
    # at 3.05-3.06: the message may have been dead-lettered first, its
    # delete answering 204 for a message no longer in 'q'
    def dead_letter_handout(deleted_at, dead_letters):
        return history.check([
            post('a', 0), claim('a', 1, claim_id='c1'),
            delete('a', deleted_at, claim_id='c1'),
            claim('a', 3.2, claim_id='c2', q='dlq'),
            delete('a', 3.3, claim_id='c2', q='dlq')],
            dead_letters=dead_letters)['violations']

    assert dead_letter_handout(3.05, {'q': 'dlq'}) == {}
    # while c1 certainly lived, its delete's 204 proves the deletion
    assert dead_letter_handout(1.1, {'q': 'dlq'}) == {'after_deletion': 1}
    # without a dead-letter queue the message cannot have moved
    assert dead_letter_handout(3.05, {}) == {'after_deletion': 1}


def test_a_hand_out_before_the_delay_is_found():
    assert violations([post('a', 10, delay=2), pop('a', 11)]) == {
        'early': 1}
    assert violations([post('a', 10, delay=2), pop('a', 12.0)]) == {}


def test_group_order_is_checked_against_the_delete_of_earlier_members():
    def group(second_at, first_deleted_at):
        return violations([
            post('a', 0, group='g', n=1), post('b', 0.1, group='g', n=2),
            claim('a', 1, claim_id='ca'),
            delete('a', first_deleted_at, claim_id='ca'),
            claim('b', second_at, claim_id='cb'),
            delete('b', second_at + 0.1, claim_id='cb')])

    assert group(second_at=1.5, first_deleted_at=1.2) == {}
    assert group(second_at=1.5, first_deleted_at=1.8) == {'group_order': 1}
    # a later member handed out before an earlier one at all
    assert violations([
        post('a', 0, group='g', n=1), post('b', 0.1, group='g', n=2),
        pop('b', 1), pop('a', 2)]) == {'group_order': 1}
    # members of other groups do not block each other
    assert violations([
        post('a', 0, group='g', n=1), post('b', 0.1, group='h', n=1),
        pop('b', 1), pop('a', 2)]) == {}


def test_counts_operations_and_faults():
    report = history.check([
        post('a', 0), pop('a', 1),
        {'op': 'fault', 'kind': 'redis_stall', 't0': 0, 't1': 1,
         'outcome': 'ok'}])
    assert report['operations'] == {'pop ok': 1, 'post ok': 1}
    assert report['faults'] == {'redis_stall': 1}
    assert report['messages']['consumed'] == 1


def test_an_exception_that_is_not_a_storage_error_is_a_violation():
    record = delete('a', 1.1, outcome='crash')
    assert violations([post('a', 0), claim('a', 1), record,
                       claim('a', 3.5), delete('a', 3.6)]) == {
        'not_a_storage_error': 1}


def test_outcomes_are_classified_by_what_the_store_may_have_done():
    from zaqar.storage import errors as storage_errors

    from zaqar_delay import errors
    assert history.classify(storage_errors.MessageIsClaimed('m')) == (
        'refused')
    assert history.classify(errors.BackendUnavailable(
        backend='Redis', reason='timeout')) == 'error'
    assert history.classify(TypeError('x')) == 'crash'


def test_a_message_whose_delete_failed_is_not_lost():
    # the consumer had it and asked to delete it: the delete may have run
    assert violations([post('a', 0), claim('a', 1),
                       delete('a', 1.1, outcome='error')]) == {}


def test_a_call_cut_short_by_sigkill_is_known_from_its_begin_line(
        tmp_path):
    recorder = history.Recorder(str(tmp_path / 'consumer.jsonl'), 'c')
    for record in (post('a', 0), claim('a', 1)):
        recorder.write(record)
    recorder.write({'op': 'delete', 'q': 'q', 'seq': 7, 'begin': True,
                    't0': 1.1, 'id': 'id-a', 'tag': 'a', 'claim': 'c'})
    with open(str(tmp_path / 'consumer.jsonl'), 'a') as f:
        f.write('{"op": "del')            # killed mid-write
    recorder.close()
    records = history.load(str(tmp_path))
    assert [r['outcome'] for r in records] == ['ok', 'ok', 'killed']
    # the delete may have run: the message is not lost
    assert history.check(records)['violations'] == {}


def test_the_recorder_writes_a_begin_line_then_the_outcome(tmp_path):
    recorder = history.Recorder(str(tmp_path / 'p.jsonl'), 'p')
    outcome, result, record = recorder.call('pop', 'q', lambda: [1])
    recorder.write(dict(record, msgs=[]))
    recorder.close()
    assert (outcome, result) == ('ok', [1])
    [loaded] = history.load(str(tmp_path))
    assert loaded['outcome'] == 'ok' and loaded['t0'] <= loaded['t1']


def test_a_lost_message_counts_the_failed_pops_that_may_have_taken_it():
    failed_pop = dict(pop('x', 5, q='dlq'), outcome='error', msgs=[])
    other_pop = dict(pop('y', 5, q='other'), outcome='error', msgs=[])
    report = history.check([post('a', 0), failed_pop, other_pop],
                           dead_letters={'q': 'dlq'})
    [lost] = report['all']['lost']
    assert lost['failed_pops_since_post'] == 1


def unconfirmed(record):
    return dict(record, unconfirmed=True)


def test_writes_acknowledged_without_their_replica_prove_nothing():
    # replica_acks: a write the replica did not confirm in time is
    # acknowledged with a warning, and a failover may lose it (the
    # option's help): such a post may be gone, such a pop or delete may
    # not have happened, such a claim may not hold.
    assert violations([unconfirmed(post('a', 0))]) == {}
    assert violations([post('a', 0), unconfirmed(pop('a', 1)),
                       pop('a', 2)]) == {}
    assert violations([post('a', 0), claim('a', 1, claim_id='c1'),
                       unconfirmed(delete('a', 1.1, claim_id='c1')),
                       claim('a', 3.2, claim_id='c2'),
                       delete('a', 3.3, claim_id='c2')]) == {}
    assert violations([post('a', 0),
                       unconfirmed(claim('a', 1, claim_id='c1')),
                       claim('a', 1.5, claim_id='c2'),
                       delete('a', 1.6, claim_id='c2')]) == {}
    # Confirmed, the same histories are violations.
    assert violations([post('a', 0), pop('a', 1), pop('a', 2)]) == {
        'after_deletion': 1, 'two_live_claims': 1}
    assert violations([post('a', 0), claim('a', 1, claim_id='c1'),
                       claim('a', 1.5, claim_id='c2'),
                       delete('a', 1.6, claim_id='c2')]) == {
        'two_live_claims': 1}


def test_the_recorder_marks_a_call_the_replica_did_not_confirm(tmp_path):
    import logging
    recorder = history.Recorder(str(tmp_path / 'p.jsonl'), 'p')

    def acknowledged_anyway():
        logging.getLogger('zaqar_delay.drivers.redis.driver').warning(
            'Redis WAIT: 0 of 1 replicas confirmed the writes within '
            '3.00 s; acknowledged anyway')
        return []

    assert 'unconfirmed' not in recorder.call('pop', 'q', lambda: [])[2]
    assert recorder.call('pop', 'q', acknowledged_anyway)[2][
        'unconfirmed'] is True
    recorder.close()
