"""One module per backend, each with ``make_driver(request, conf)``.

``request`` is the pytest request, for the server fixtures a backend needs;
the returned data driver must expose ``use_clock(fn)`` (tests move time with
it; ``None`` restores the store's clock). The contract suite runs once for
every module listed in ``BACKENDS``.
"""

BACKENDS = ('redis',)
