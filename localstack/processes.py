"""Stopping the server processes that tests start, by their own PID."""

import subprocess


def stop(process, timeout=10):
    """Terminate ``process`` (a Popen or None), killing it if it lingers."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
