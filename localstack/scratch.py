"""Scratch directories that go when the process that made them ends."""

import atexit
import shutil
import tempfile


def scratch_dir(prefix):
    """A new temporary directory, removed when this interpreter exits.

    The servers and configs a run starts keep their files there for as
    long as the run may quote them (a server's log in a failure message,
    a restart reading its config again), and no run leaves them behind:
    the test suite keeps TMPDIR on RAM-backed /dev/shm, where hundreds of
    configs a run would otherwise pile up run after run."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
