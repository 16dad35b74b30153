"""Progress lines: reads done of the total, rate and time left."""

import time


class Progress:
    """``total`` messages, each read ``passes`` times (a move reads the
    source twice: to move, then to verify)."""

    def __init__(self, total, out, passes=1, clock=time.monotonic):
        self.total = total
        self.passes = passes
        self.done = 0
        self._out = out
        self._clock = clock
        self._started = clock()

    def rate(self):
        """Messages (not reads) per second so far."""
        seconds = self._clock() - self._started
        return self.done / self.passes / seconds if seconds > 0 else 0.0

    def add(self, count, what):
        """Count ``count`` more messages read and print where we are."""
        self.done += count
        rate = self.rate()
        left = max(0, self.total - self.done / self.passes)
        eta = '{:.0f} s'.format(left / rate) if rate else '?'
        self.say('{}: {} / {} messages{}, {:.0f} messages/s, {} left'.format(
            what, self.done, self.total * self.passes,
            ' (read {} times each)'.format(self.passes)
            if self.passes > 1 else '', rate, eta))

    def say(self, line):
        print(line, file=self._out, flush=True)
