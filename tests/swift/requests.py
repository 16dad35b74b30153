"""Counting the Swift requests a driver makes (work is counted in these
tests, never timed)."""


class Requests:
    """Counts the Swift requests a driver makes, by method."""

    def __init__(self, driver, monkeypatch):
        self.calls = []
        store = driver.store
        original = store.call

        def call(method, *args, **kwargs):
            self.calls.append(method)
            return original(method, *args, **kwargs)

        monkeypatch.setattr(store, 'call', call)

    def during(self, fn):
        self.calls.clear()
        fn()
        return len(self.calls)
