"""The gated server (``tests/actors/fixtures/gated_server.py``) and its release.

Its ``hold`` tool waits until a byte arrives on the FIFO named by
``RELEASE_FIFO``: :func:`make_fifo` makes one, :func:`release`
writes the byte (every held call then finishes, and later ones at once).
"""

from __future__ import annotations

import os
from pathlib import Path

GATED = str(Path(__file__).parent / "actors" / "fixtures" / "gated_server.py")


def make_fifo(tmp_path: Path) -> Path:
    """A FIFO to pass the server as ``RELEASE_FIFO``."""
    path = tmp_path / "release"
    os.mkfifo(path)
    return path


def release(fifo: Path) -> None:
    """Let every held call finish (the server holds the FIFO open for reading)."""
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
