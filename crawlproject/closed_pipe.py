"""A command whose output is cut by a closed pipe ends quietly.

``crawlproject status --json | head -1``: ``head`` exits after its line, the
next write to stdout raises BrokenPipeError, and Python would print a
traceback, then "Exception ignored ... BrokenPipeError" when it flushes
stdout at exit. As Python's signal docs advise ("Note on SIGPIPE"), stdout is
pointed at /dev/null so that the final flush succeeds, and the command ends
with status 1, as Python itself does on EPIPE (and rich's Console, which the
status table is written with: ``Console.on_broken_pipe``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def quiet_on_closed_pipe(command: Callable[[], int]) -> int:
    """``command()``'s exit status, or 1 when its stdout was closed under it."""
    try:
        status = command()
        sys.stdout.flush()  # a last buffered write fails here, not at exit
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    return status
