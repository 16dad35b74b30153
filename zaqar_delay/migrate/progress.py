"""Progress lines: messages done of the total, rate and time left."""

import time


class Progress:

    def __init__(self, total, out, clock=time.monotonic):
        self.total = total
        self.done = 0
        self._out = out
        self._clock = clock
        self._started = clock()

    def rate(self):
        seconds = self._clock() - self._started
        return self.done / seconds if seconds > 0 else 0.0

    def add(self, count, what):
        """Count ``count`` more messages done and print where we are."""
        self.done += count
        rate = self.rate()
        left = max(0, self.total - self.done)
        eta = '{:.0f} s'.format(left / rate) if rate else '?'
        self.say('{}: {} / {} messages, {:.0f} messages/s, {} left'.format(
            what, self.done, self.total, rate, eta))

    def say(self, line):
        print(line, file=self._out, flush=True)
