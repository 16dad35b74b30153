"""What the per-backend benchmarks share: their command line and the
lines that print ratios (benchmarks/retention.py and consumers.py repeat
every line with the word "ratio" under one heading, so these wordings
are read by them)."""

import argparse
import os


def sizes(doc, defaults, argv=None, quick_min=1):
    """Parse one ``--<size>`` option per entry of ``defaults`` (name ->
    default; ``_`` in a name is ``-`` on the command line) and
    ``--quick``, which divides every size by 10 (at least ``quick_min``):
    a smoke run, not figures."""
    parser = argparse.ArgumentParser(description=doc.split('\n')[0])
    for name, default in defaults.items():
        parser.add_argument('--' + name.replace('_', '-'), type=int,
                            default=default)
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args(argv)
    if args.quick:
        for name in defaults:
            setattr(args, name, max(quick_min, getattr(args, name) // 10))
    return args


def mongodb_parser(doc):
    """The MongoDB benchmarks' parser: a server URI (else mongomock) and
    ``--quick``; each adds its own sizes."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument('--mongodb-uri',
                        default=os.environ.get('ZAQAR_DELAY_TEST_MONGODB_URI'),
                        help='a real MongoDB server; default: mongomock')
    parser.add_argument('--quick', action='store_true',
                        help='small sizes, to check that everything runs')
    return parser


def percentile(values, pct):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def post_ratio(posted, rates):
    """Persistent consumers: post rates ({label: messages/s}, without
    consumers first) and their ratio."""
    print('post, 10 per call, %s messages: %s' % (
        format(posted, ','), ', '.join(
            '%s %.0f/s' % item for item in rates.items())))
    base, loaded = rates.values()
    print('ratio post throughput without / with consumers: %.2fx '
          '(target <= 1.2)' % (base / loaded), flush=True)


def resume_ratio(medians, digits):
    """Persistent consumers: median ms of a resume ({label: ms}, far
    behind the cursor first) with ``digits`` decimals, and their ratio."""
    print('resume a page of 10, median ms: %s' % ', '.join(
        ('%s %.*f' % (label, digits, ms)) for label, ms in medians.items()))
    far, head = medians.values()
    print('ratio resume behind / at head: %.2fx (target <= 1.2)' % (
        far / head), flush=True)
