"""Tempest API tests for what zaqar-delay adds to Zaqar's v2 REST API.

Installed with zaqar-delay and found by tempest through the
``tempest.test_plugins`` entry point; run with
``tempest run --regex zaqar_delay``. Imports only tempest and
zaqar-tempest-plugin, never Zaqar or zaqar_delay, so it installs into a
tempest venv with ``pip install --no-deps``.
"""
