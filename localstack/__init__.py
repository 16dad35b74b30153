"""Local servers on loopback (redis-server, Sentinel, Cluster, Swift,
Keystone, zaqar-server, the fault TCP and HTTP proxies, the tempest
runner) that the tests, tools/demo.py, the benchmarks and the docs examples
start, and what they build on them: Zaqar configurations (backends), each
backend's data driver (factories), Zaqar's pooling catalogue
(pooling_catalog) and a notifier that records what it sends (notifier).
Not part of the installed driver (setup.cfg installs ``zaqar_delay*``
only)."""
