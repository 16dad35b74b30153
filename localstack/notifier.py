"""Zaqar's notifier on a driver, and a webhook receiver on loopback, for
the tests and the notifier benchmark."""

import contextlib
import http.server
import json
import queue as queue_module
import threading
import uuid

from zaqar.storage import pipeline

NOTIFIER = 'zaqar.notification.notifier'


def notifying(driver):
    """``driver`` behind Zaqar's storage pipeline with ``[storage]
    message_pipeline = zaqar.notification.notifier``, as a zaqar-server
    that uses subscriptions runs it."""
    driver.conf.set_override('message_pipeline', [NOTIFIER], group='storage')
    return pipeline.DataDriver(driver.conf, driver, driver.control_driver)


def consumer_subscriber():
    return 'cursor:' + str(uuid.uuid4())


@contextlib.contextmanager
def webhook_receiver():
    """``(url, received)``: every POST to ``url`` puts its JSON body on
    the ``received`` queue."""
    received = queue_module.Queue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers['Content-Length'])
            received.put(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield 'http://127.0.0.1:%d/hook' % server.server_port, received
    finally:
        server.shutdown()
        server.server_close()
