"""Figures of ``python -m benchmarks.run --plot DIR`` (matplotlib).

``draw(figures, directory)`` takes what benchmarks.run.bench returned per
backend ({backend: {'throughput': {name: (ours, theirs)}, 'latency':
[(delayed ahead, our median s, Zaqar's median s or None)]}}) and writes:

* claim-latency-vs-delayed-backlog.png: median claim latency against the
  delayed messages queued ahead, ours (solid) and Zaqar's (dashed) per
  backend; a Zaqar run that failed (its Swift driver overflows the stack
  behind a few thousand delayed messages) is left out of its line;
* throughput.png: posts and claim+deletes per second, ours and Zaqar's,
  per backend.
"""

import os

import matplotlib

matplotlib.use('Agg')   # files only, no display
from matplotlib import pyplot  # noqa: E402 (after choosing the backend)

LATENCY = 'claim-latency-vs-delayed-backlog.png'
THROUGHPUT = 'throughput.png'


def draw(figures, directory):
    """Write the PNG files into ``directory``; returns their paths."""
    os.makedirs(directory, exist_ok=True)
    return [_latency(figures, os.path.join(directory, LATENCY)),
            _throughput(figures, os.path.join(directory, THROUGHPUT))]


def _latency(figures, path):
    fig, axes = pyplot.subplots(figsize=(7, 4.5))
    for backend, measured in figures.items():
        rows = measured['latency']
        line, = axes.plot([r[0] for r in rows], [r[1] * 1000 for r in rows],
                          marker='o', label=backend + ', zaqar-delay')
        theirs = [(r[0], r[2] * 1000) for r in rows if r[2] is not None]
        if theirs:
            axes.plot(*zip(*theirs), marker='x', linestyle='--',
                      color=line.get_color(), label=backend + ', Zaqar')
    axes.set_xscale('symlog', linthresh=1000)
    axes.set_yscale('log')
    axes.set_xlabel('delayed messages queued ahead')
    axes.set_ylabel('median claim latency (ms)')
    axes.set_title('Claim latency against the delayed backlog')
    axes.legend(fontsize='small')
    return _save(fig, path)


def _throughput(figures, path):
    names = sorted({name for measured in figures.values()
                    for name in measured['throughput']})
    fig, all_axes = pyplot.subplots(1, len(names) or 1, squeeze=False,
                                    figsize=(4 * max(1, len(names)), 4))
    backends = list(figures)
    for axes, name in zip(all_axes[0], names):
        pairs = [figures[b]['throughput'].get(name, (0, 0))
                 for b in backends]
        spots = range(len(backends))
        axes.bar([x - 0.2 for x in spots], [p[0] for p in pairs], 0.4,
                 label='zaqar-delay')
        axes.bar([x + 0.2 for x in spots], [p[1] for p in pairs], 0.4,
                 label='Zaqar')
        axes.set_xticks(list(spots), backends)
        axes.set_title(name)
        axes.set_ylabel('messages/s')
        axes.legend(fontsize='small')
    return _save(fig, path)


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot.close(fig)
    return path
