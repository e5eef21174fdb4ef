"""Child processes for the stdio transport: spawn, wait, signal the group.

Private helpers of :mod:`trio_mcp.transports.stdio`.

Why not ``trio.lowlevel.open_process``: it calls ``subprocess.Popen`` in a
worker thread of trio's thread cache, and Linux delivers a parent-death
signal (``PR_SET_PDEATHSIG``) when the *thread* that forked the child exits,
not the process. Cached worker threads exit after 10 s idle, so every server
would be SIGKILLed 10 s after it started. :func:`spawn` therefore forks from
the calling (trio) thread, which lives as long as ``trio.run``; the fork
blocks the event loop for the time ``fork`` + ``exec`` take (about a
millisecond for a small parent). The child is then watched with a pidfd
(Linux >= 5.3) or, elsewhere, with ``waitid`` in a thread.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import trio

__all__ = ["SAFE_ENV_VARS", "ChildProcess", "build_env", "spawn"]

#: Variables copied from the parent's environment into a server's
#: environment by default (``inherit_env=False``): enough to find programs,
#: a home directory and a locale, and nothing secret.
SAFE_ENV_VARS: Final = (
    "HOME",
    "LOGNAME",
    "USER",
    "PATH",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
)

#: Seconds between two looks at a process group whose leader has exited
#: (its other members are not our children: nothing to wait on).
GROUP_POLL_INTERVAL: Final = 0.02

_LINUX: Final = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG: Final = 1


def build_env(extra: Mapping[str, str], *, inherit: bool) -> dict[str, str]:
    """The child's environment: ``extra`` merged onto the parent's whole
    environment (``inherit``) or onto its :data:`SAFE_ENV_VARS`."""
    if inherit:
        env = dict(os.environ)
    else:
        env = {k: os.environ[k] for k in SAFE_ENV_VARS if k in os.environ}
    env.update(extra)
    return env


def _pdeathsig_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks for SIGKILL when the forking thread dies.

    Runs in the forked child before ``exec``. ``preexec_fn`` is documented
    as unsafe in multi-threaded parents because the child might need a lock
    held by another thread at fork time; this one only calls a foreign
    function resolved beforehand, ``getppid`` and ``kill`` (no Python-level
    locks, no imports). If the owner died between ``fork`` and ``prctl`` the
    signal would never come, so the child checks its parent and kills itself.
    """
    if not _LINUX:
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    parent = os.getpid()
    sigkill = int(signal.SIGKILL)

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), sigkill)

    return preexec


def _pidfd_open(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
        return fd
    except OSError:  # old kernel, seccomp...
        return None


class ChildProcess:
    """A spawned server: its pipes (parent ends, non-blocking) and its
    process group (``start_new_session``: the group id is the pid)."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin_fd: int, stdout_fd: int, stderr_fd: int) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd
        self._pidfd = _pidfd_open(popen.pid)

    @property
    def returncode(self) -> int | None:
        """Exit status once reaped; ``-N`` when killed by signal ``N``."""
        return self.popen.returncode

    async def wait(self) -> int:
        """Wait for the leader to exit and reap it. One waiter at a time."""
        if self.popen.returncode is not None:
            await trio.lowlevel.checkpoint()
            return self.popen.returncode
        if self._pidfd is not None:
            await trio.lowlevel.wait_readable(self._pidfd)
        else:
            await trio.to_thread.run_sync(self._block_until_exit, abandon_on_cancel=True)
        code = self.popen.wait()  # a zombie by now: returns at once
        self._close_pidfd()
        return code

    def _block_until_exit(self) -> None:
        try:
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the whole process group; False if nobody is left.

        Safe after the leader was reaped: Linux keeps a pid reserved while it
        is any live process's group id, so the id cannot name a stranger
        while members remain.
        """
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def group_alive(self) -> bool:
        """Whether any member of the group still runs (zombies do not count:
        an init that does not reap orphans would keep them forever)."""
        if not self.signal_group(0):
            return False
        if not _LINUX:
            return True
        return _group_has_live_member(self.pid)

    def close_fds(self) -> None:
        self._close_pidfd()


def _group_has_live_member(pgid: int) -> bool:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        # state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    parent_death_signal: bool,
) -> ChildProcess:
    """Start ``argv`` in a new session with fresh pipes on fds 0, 1 and 2.

    Raises :class:`OSError` (``FileNotFoundError`` for a missing program or
    ``cwd``) with nothing left behind.
    """
    ours: list[int] = []
    theirs: list[int] = []
    try:
        for _ in range(3):
            r, w = os.pipe()  # non-inheritable; Popen dup2()s the child's ends
            ours.append(r)
            theirs.append(w)
        # stdin: child reads pipe 0; stdout/stderr: child writes pipes 1, 2
        ours[0], theirs[0] = theirs[0], ours[0]
        popen = subprocess.Popen(
            list(argv),
            stdin=theirs[0],
            stdout=theirs[1],
            stderr=theirs[2],
            env=dict(env),
            cwd=cwd,
            close_fds=True,
            start_new_session=True,
            # the parent-death signal can only be set in the child (prctl); it runs no Python locks
            preexec_fn=_pdeathsig_preexec() if parent_death_signal else None,  # noqa: PLW1509
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    for fd in ours:
        os.set_blocking(fd, False)
    return ChildProcess(popen, ours[0], ours[1], ours[2])
