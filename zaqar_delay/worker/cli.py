"""Console scripts: ``zaqar-delay-worker`` runs an app's handlers until
SIGTERM; ``zaqar-delay-dead-letters`` lists and redrives dead letters.

``MODULE:APP`` names an :class:`App` (or a function returning one) the way
gunicorn names a WSGI app: ``myproject.events:app``.
"""

import argparse
import dataclasses
import importlib
import json
import logging
import os
import signal
import sys
import threading

from zaqar_delay.worker import app as zd_app
from zaqar_delay.worker import events


def load_app(spec):
    module_name, sep, attribute = spec.partition(':')
    if not sep or not module_name or not attribute:
        raise SystemExit('expected MODULE:APP, for example '
                         'myproject.events:app; got {!r}'.format(spec))
    sys.path.insert(0, os.getcwd())
    try:
        found = importlib.import_module(module_name)
        for part in attribute.split('.'):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise SystemExit('cannot load {}: {}'.format(spec, exc))
    if not isinstance(found, zd_app.App) and callable(found):
        found = found()
    if not isinstance(found, zd_app.App):
        raise SystemExit('{} is not a zaqar_delay.worker.App: {!r}'.format(
            spec, found))
    return found


def _not_negative(text):
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError('must be 0 or more: ' + text)
    return value


def worker_main(argv=None):
    parser = argparse.ArgumentParser(
        prog='zaqar-delay-worker',
        description='Run the handlers of a zaqar_delay.worker.App until '
                    'SIGTERM or SIGINT, then close it gracefully.')
    parser.add_argument('app', metavar='MODULE:APP')
    parser.add_argument('--progress-interval', type=_not_negative,
                        default=10.0,
                        help='seconds between progress lines (0: none)')
    parser.add_argument('--metrics-port', type=int,
                        help="serve the app's PrometheusMetrics on this "
                             'port (loopback unless --metrics-addr)')
    parser.add_argument('--metrics-addr', default='127.0.0.1')
    parser.add_argument('--log-level', default='WARNING', type=str.upper,
                        choices=('DEBUG', 'INFO', 'WARNING', 'ERROR',
                                 'CRITICAL'))
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level,
                        format='%(asctime)s %(levelname)s %(name)s: '
                               '%(message)s')
    app = load_app(args.app)
    if args.metrics_port is not None:
        sink = app.metrics.sinks[-1]
        if not hasattr(sink, 'serve'):
            raise SystemExit('--metrics-port needs the app to be built with '
                             'metrics=PrometheusMetrics()')
        sink.serve(args.metrics_port, args.metrics_addr)

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    app.start()
    print('zaqar-delay-worker: started', flush=True)
    interval = args.progress_interval or None
    while not stop.wait(interval):
        try:
            app.refresh_stats()
        except Exception:
            # Zaqar away for a moment: the handlers go on, and so does
            # the progress line, with the counts it has.
            logging.exception('reading queue stats failed')
        print('zaqar-delay-worker: ' + app.progress(), flush=True)
    print('zaqar-delay-worker: closing', flush=True)
    finished = app.close()
    print('zaqar-delay-worker: closed ' + app.progress(), flush=True)
    if not finished:
        # Handler threads that overran close_timeout would keep the
        # interpreter alive; their events come back when claims expire.
        logging.shutdown()
        os._exit(1)
    return 0


def dead_letters_main(argv=None):
    parser = argparse.ArgumentParser(
        prog='zaqar-delay-dead-letters',
        description="List or redrive an event type's dead letters.")
    parser.add_argument('app', metavar='MODULE:APP')
    commands = parser.add_subparsers(dest='command', required=True)
    listing = commands.add_parser('list', help='one JSON line per event')
    listing.add_argument('type')
    listing.add_argument('--limit', type=int)
    moving = commands.add_parser(
        'redrive', help='move dead letters back to their queue (exit '
        'status 1 when a named one is held by another claim)')
    moving.add_argument('type')
    moving.add_argument('--id', dest='ids', action='append',
                        help='only this message id (repeatable)')
    args = parser.parse_args(argv)
    app = load_app(args.app)
    try:
        if args.command == 'list':
            for letter in app.dead_letters(args.type, args.limit):
                print(json.dumps(dataclasses.asdict(letter),
                                 sort_keys=True))
            return 0
        result = app.redrive_report(args.type, args.ids)
    except ValueError as exc:      # events.EventError too
        parser.error(str(exc))
    print('redriven: {}'.format(len(result.moved)))
    if result.held:
        print('held by another claim, not moved: ' + ' '.join(result.held))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(worker_main())
