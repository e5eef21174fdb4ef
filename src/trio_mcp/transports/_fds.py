"""The file descriptors under a stdio stream (:class:`StreamFds`): how each
is read and written without blocking, which writes go out whole or not at
all, and how each is given back when the stream closes."""

from __future__ import annotations

import os
import select
import socket
import stat
import sys
from typing import Final

import trio

__all__ = ["SEND_FLAGS", "StreamFds", "atomic_socket"]

#: A socket's sends: never block, never raise SIGPIPE (EPIPE instead).
SEND_FLAGS: Final = socket.MSG_DONTWAIT | getattr(socket, "MSG_NOSIGNAL", 0)


def atomic_socket(sock: socket.socket | None) -> bool:
    """A send of up to ``PIPE_BUF`` bytes on ``sock`` is whole or nothing,
    as a pipe's write is: true of a Unix stream socket on Linux (the
    socketpairs libuv-based hosts such as Node give their servers) whose
    buffer is big enough. Linux queues such a send as one buffer when it is
    shorter than half the socket's buffer less a header, and a buffer is
    queued whole or refused (EAGAIN)."""
    if sock is None or not sys.platform.startswith("linux"):
        return False
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        return False
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2 - 64 >= select.PIPE_BUF


class StreamFds:
    """A stream's read and write fds (maybe one and the same). Sockets
    (libuv-based clients hand their servers socketpairs) are used with
    :data:`SEND_FLAGS` and ``MSG_DONTWAIT``: their ``O_NONBLOCK`` flag,
    shared with every duplicate of the fd, is left alone. Other fds are made
    non-blocking, and their mode is restored when they are closed."""

    __slots__ = ("_blocking", "_socks", "atomic", "rsock", "wsock")

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._socks: dict[int, socket.socket] = {}
        self._blocking: dict[int, bool] = {}
        for fd in {read_fd, write_fd}:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                self._socks[fd] = socket.socket(fileno=fd)
            else:
                self._blocking[fd] = os.get_blocking(fd)
                os.set_blocking(fd, False)
        #: The socket of each fd that is one (None: use os.read / os.write).
        self.rsock = self._socks.get(read_fd)
        self.wsock = self._socks.get(write_fd)
        #: Writes of up to PIPE_BUF bytes to the write fd are whole or nothing.
        self.atomic = stat.S_ISFIFO(os.fstat(write_fd).st_mode) or atomic_socket(self.wsock)

    def close(self, fd: int) -> None:
        """Close ``fd`` (one of the two), waking any task waiting on it."""
        trio.lowlevel.notify_closing(fd)
        sock = self._socks.pop(fd, None)
        if sock is not None:
            sock.close()
            return
        try:
            os.set_blocking(fd, self._blocking[fd])
        except (OSError, KeyError):
            pass
        os.close(fd)
