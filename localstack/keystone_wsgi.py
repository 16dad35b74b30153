"""Serve Keystone's WSGI app on one loopback port, one request at a time.

Run with the Python of Keystone's own venv:
``python keystone_wsgi.py PORT CONFIG_FILE``. Keystone 30 ships no
``keystone-wsgi-public`` script, so this is the smallest server for it.
One thread, because Keystone on sqlite answers "database is locked" to
parallel writers. Imports only the standard library and Keystone.
"""

import os
import sys
from wsgiref import simple_server


class QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


def main():
    port, config_file = int(sys.argv[1]), sys.argv[2]
    os.environ['OS_KEYSTONE_CONFIG_FILES'] = config_file
    # Keystone parses sys.argv itself when it loads its configuration.
    sys.argv = sys.argv[:1]
    from keystone.wsgi import api
    server = simple_server.make_server('127.0.0.1', port, api.application,
                                       handler_class=QuietHandler)
    server.serve_forever()


if __name__ == '__main__':
    main()
