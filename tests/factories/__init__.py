"""One module per backend, each with ``make_driver(request, conf)``.

``request`` is the pytest request, for the server fixtures a backend needs;
the returned data driver must expose ``use_clock(fn)`` (tests move time with
it; ``None`` restores the store's clock). Each module also has
``zaqar_store(request)`` returning ``(message_store name, {option: value})``
for the ``[drivers:message_store:<name>]`` section of a zaqar.conf, which the
integration tests use to boot Zaqar itself on the backend. The contract and
integration suites run once for every module listed in ``BACKENDS``; the
message-group suites for those in ``GROUP_BACKENDS``, the backends that
implement SPEC section 4 so far.
"""

BACKENDS = ('redis', 'mongodb', 'swift')
GROUP_BACKENDS = ('redis', 'mongodb')
