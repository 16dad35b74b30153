"""One module per backend, each with ``make_driver(request, conf)``.

``request`` is the pytest request, for the server fixtures a backend needs;
the returned data driver must expose ``use_clock(fn)`` (tests move time with
it; ``None`` restores the store's clock). Each module also has
``zaqar_store(request)`` returning ``(message_store name, {option: value})``
for the ``[drivers:message_store:<name>]`` section of a zaqar.conf, which the
integration tests use to boot Zaqar itself on the backend. The contract and
integration suites, the message-group suites included, run once for every
module listed in ``BACKENDS``.
"""

BACKENDS = ('redis', 'mongodb', 'swift')
