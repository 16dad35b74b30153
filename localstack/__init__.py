"""Local servers on loopback (redis-server, Sentinel, Cluster, Swift,
Keystone, zaqar-server, the fault TCP and HTTP proxies, the tempest
runner) that the tests, tools/demo.py, the benchmarks and the docs examples
start. Not part of the installed driver (setup.cfg installs
``zaqar_delay*`` only)."""
