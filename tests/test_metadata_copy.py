"""The process cache of queue metadata copies (zaqar_delay/metadata_copy.py),
with a fake data store: what a call reads from the cache, what its
requests must check, and when it runs again. The Redis driver's own tests
(tests/redis/test_round_trips.py) run the same rules against Redis."""

import pytest

from zaqar_delay import metadata_copy


class FakeCopies(metadata_copy.Copies):
    """A store whose generations the test sets; counts its requests."""

    def __init__(self):
        self.process_cache = metadata_copy.ProcessCache()
        self.generations = {}
        self.metadata = {}
        self.finds = 0
        self.checks = 0

    def find(self, queue, project):
        self.finds += 1
        generation = self.generations.get(queue, '')
        metadata = self.metadata.get(queue, {})
        self.process_cache.put(queue, project, metadata, generation, 60000)
        return metadata, generation

    def fill(self, queue, project, generation, metadata):
        raise AssertionError('every queue here has a copy')

    def forget(self, queue, project):
        self.generations[queue] = self.generations.get(queue, '') + '+'

    def current(self, queue, project, generation):
        self.checks += 1
        return self.generations.get(queue, '') == generation

    def script(self, queue, repeatable=False):
        """A request that acts, checking what the call assumed."""
        expected = metadata_copy.take_assumed(queue, None, repeatable)
        if expected is not None and expected != self.generations.get(
                queue, ''):
            raise metadata_copy.StaleCopy()


def read(copies, queue='q'):
    return metadata_copy.read(copies, queue, None, lambda: {})


@pytest.fixture
def copies():
    found = FakeCopies()
    read(found)   # cached from now on
    found.finds = 0
    return found


def test_a_call_on_a_current_copy_reads_nothing_and_runs_once(copies):
    runs = []

    def call():
        runs.append(read(copies))
        copies.script('q')
        return 'done'
    assert metadata_copy.run_operation(copies, call) == 'done'
    assert (len(runs), copies.finds, copies.checks) == (1, 0, 0)


def test_a_call_whose_request_finds_the_copy_stale_runs_again_afresh(copies):
    copies.metadata['q'] = {'_default_message_delay': 5}
    copies.forget('q', None)
    runs = []

    def call():
        runs.append(read(copies))
        copies.script('q')
        return runs[-1]
    # The first run read the cached {}; its request found the generation
    # moved, so the call ran again, reading the store.
    assert metadata_copy.run_operation(copies, call) == {
        '_default_message_delay': 5}
    assert runs == [{}, {'_default_message_delay': 5}]
    assert copies.finds == 1


def test_a_call_stale_on_every_cached_run_ends_without_the_cache(copies):
    runs = []

    def call():
        # Another thread's find keeps putting back a copy older than the
        # store's each time this call's run dropped it.
        copies.process_cache.put('q', None, {}, 'older', 60000)
        runs.append(read(copies))
        copies.script('q')
        return len(runs)
    assert metadata_copy.run_operation(copies, call) == \
        metadata_copy.CACHED_RUNS + 1
    # The last run read the store, and its request checked nothing.
    assert copies.finds == 1


def test_an_error_before_acting_is_checked_against_the_store(copies):
    def refuse():
        read(copies)
        raise ValueError('refused by the policy read')
    with pytest.raises(ValueError):
        metadata_copy.run_operation(copies, refuse)
    assert copies.checks == 1
    copies.forget('q', None)
    runs = []

    def refuse_once():
        runs.append(read(copies))
        if len(runs) == 1:
            raise ValueError('refused by a stale policy')
        return 'accepted'
    assert metadata_copy.run_operation(copies, refuse_once) == 'accepted'
    assert copies.finds == 1


def test_an_assumption_about_another_queue_is_checked_before_acting(copies):
    read(copies, 'other')
    copies.forget('q', None)
    copies.finds, acted = 0, []

    def call():
        read(copies)
        copies.script('other')
        acted.append('other')
    metadata_copy.run_operation(copies, call)
    # Checked (stale) before the request on 'other': that request ran
    # once, in the run that read 'q' afresh.
    assert acted == ['other'] and copies.checks == 1 and copies.finds == 1


def test_a_call_that_acted_reads_no_cached_copy_after(copies):
    read(copies, 'target')
    copies.finds = 0

    def call():
        copies.script('q')            # acts
        read(copies, 'target')        # from the store
    metadata_copy.run_operation(copies, call)
    assert copies.finds == 1

    def reads_first():
        copies.script('q', repeatable=True)   # a read: the call may
        read(copies, 'target')                # still use the cache
        copies.script('target')
    copies.finds = 0
    metadata_copy.run_operation(copies, reads_first)
    assert copies.finds == 0


def test_outside_a_call_every_read_asks_the_store(copies):
    read(copies)
    assert copies.finds == 1


def test_the_process_cache_keeps_the_most_recently_used_and_expires():
    cache = metadata_copy.ProcessCache(size=2)
    cache.put('a', None, {}, '1', 60000)
    cache.put('b', None, {}, '1', 60000)
    assert cache.get('a', None) == ({}, '1')
    cache.put('c', None, {}, '1', 60000)
    assert cache.get('b', None) is None
    assert cache.get('a', None) == ({}, '1')
    cache.put('d', None, {}, '1', 0)
    assert cache.get('d', None) is None


def test_the_process_cache_hands_out_what_it_holds_for_an_unchanged_text():
    cache = metadata_copy.ProcessCache()
    held = {'_max_claim_count': 3}
    three = metadata_copy.digest(b'{"_max_claim_count":3}')
    cache.put('a', None, held, '1', 60000, text_digest=three)
    assert cache.unchanged('a', None, '1', three) is held
    # The digest of a str is that of its UTF-8 bytes.
    assert cache.unchanged(
        'a', None, '1', metadata_copy.digest('{"_max_claim_count":3}')) is held
    # Another text or generation is another copy, decoded afresh.
    four = metadata_copy.digest(b'{"_max_claim_count":4}')
    assert cache.unchanged('a', None, '1', four) is None
    assert cache.unchanged('a', None, '2', three) is None
    assert cache.unchanged('b', None, '1', three) is None
    # A copy put without its text is never taken for unchanged.
    cache.put('c', None, {}, '1', 60000)
    assert cache.unchanged('c', None, '1', metadata_copy.digest(b'{}')) is None
