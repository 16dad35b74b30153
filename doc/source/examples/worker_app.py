"""The delayed-event worker library: enqueue an event with a delay and
handle it, with retries and dead letters kept by the server.

    python worker_app.py http://zaqar.example.org:8888 PROJECT
"""

import dataclasses
import sys
import threading

from zaqar_delay.worker import App


@dataclasses.dataclass
class PaymentCheck:
    order: int


def main(url, project):
    app = App(url, project=project, prefix='shop-')
    done = threading.Event()
    handled = []

    def check_payment(event):          # event is a PaymentCheck
        handled.append(event.order)
        done.set()                      # returning acknowledges the event

    app.add_handler(PaymentCheck, check_payment)
    app.enqueue(PaymentCheck(order=7), delay=1)
    app.start()                         # as zaqar-delay-worker does
    try:
        done.wait(60)
    finally:
        app.close()
    print('handled orders:', handled)
    return handled


if __name__ == '__main__':
    main(*sys.argv[1:])
