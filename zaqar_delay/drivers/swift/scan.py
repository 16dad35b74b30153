"""The budget of one message listing (messages.py).

Swift cannot filter a listing, so a page of messages is found by reading
the queue's index entries in order. What the entries tell (expired,
delayed, not kept, posted by the listing client when ``echo`` is off:
``u`` in their Content-Type) costs nothing; anything else costs a message
read. A call reads at most READS_PER_MESSAGE messages per message asked
for and lists at most MAX_PAGES pages, whatever the queue holds; when
that runs out before the page is full, the page is short (or empty) and
its marker is the last position looked at, so the next call goes on
after it rather than reading the same entries again.
"""

READS_PER_MESSAGE = 5
MAX_PAGES = 10


class Scan:
    """What one listing call has left to spend, and how far it looked."""

    def __init__(self, limit):
        self.reads_left = READS_PER_MESSAGE * limit
        # Every position up to this one was looked at.
        self.through = None
        # True when the budget, not the end of the queue, ended the scan.
        self.spent = False

    def pages(self, pages):
        """At most MAX_PAGES of ``pages`` (a lazy iterator of listings)."""
        for _ in range(MAX_PAGES):
            page = next(pages, None)
            if page is None:
                return
            yield page
        self.spent = True

    def affordable(self, candidates):
        """The items the budget still lets the call read, of
        ``candidates``: (position, item) in position order, item None for
        an entry its listing decided alone."""
        chosen = []
        for position, item in candidates:
            if item is not None:
                if not self.reads_left:
                    self.spent = True
                    self.through = position - 1
                    return chosen
                self.reads_left -= 1
                chosen.append(item)
            self.through = position
        return chosen

    def next_marker(self, found, limit):
        """The marker of a page of ``found`` messages: its last message,
        or, on a page the budget cut short, the last position looked at."""
        if self.spent and len(found) < limit and self.through is not None:
            return self.through
        return found[-1].position if found else None
