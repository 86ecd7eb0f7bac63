"""Which host processes belong to a job, and killing all of them (Linux ``/proc``).

A job's processes are found by what they cannot shed: the dedicated user id the local
sandbox gives each job when it runs as root (:class:`UidLease`), or an environment token
(without root, a weaker mark: a program can rewrite its own environment).

Example:
    >>> import os, subprocess
    >>> child = subprocess.Popen(["sleep", "60"])
    >>> child.pid in pids_where(uid=os.getuid())
    True
    >>> kill_until_gone(lambda: [child.pid] if child.poll() is None else [])
    []
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "UidLease",
    "child_pidfds",
    "children",
    "count_tasks",
    "kill_pidfds",
    "kill_until_gone",
    "parent_pid",
    "pids_where",
    "running",
]


def _proc_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _status_field(pid: int, field: bytes) -> int | None:
    """The first number of a ``/proc/<pid>/status`` line (``Uid:``, ``Threads:``)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _has_env(pid: int, prefix: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return any(entry.startswith(prefix) for entry in environ.read().split(b"\0"))
    except OSError:
        return False


def pids_where(*, uid: int | None = None, env: str | None = None) -> list[int]:
    """Pids (other than this process) whose real uid is ``uid`` and/or whose environment has
    an entry starting with ``env`` (``NAME=value``)."""
    entry = env.encode() if env is not None else None
    found = []
    for pid in _proc_pids():
        if pid == os.getpid():
            continue
        if uid is not None and _status_field(pid, b"Uid:") != uid:
            continue
        if entry is not None and not _has_env(pid, entry):
            continue
        found.append(pid)
    return found


def parent_pid(pid: int) -> int | None:
    """The parent of ``pid`` (None when it is gone)."""
    return _status_field(pid, b"PPid:")


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (its main thread's)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as found:
            return [int(child) for child in found.read().split()]
    except OSError:
        return []


def running(pid: int) -> bool:
    """``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def count_tasks(uid: int) -> int:
    """Processes and threads whose real uid is ``uid``: what ``RLIMIT_NPROC`` counts."""
    others = sum(_status_field(pid, b"Threads:") or 0 for pid in pids_where(uid=uid))
    return others + (_status_field(os.getpid(), b"Threads:") or 1)


def kill_until_gone(find: Callable[[], list[int]], timeout_s: float = 5.0) -> list[int]:
    """SIGKILL every pid ``find`` returns until it returns none (a fork bomb keeps forking
    while it is being killed); returns the pids still alive at the deadline.

    Each process is signalled through a pidfd opened before ``find`` confirmed it a second
    time, so a pid that was recycled in between is never hit."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = find()
        if not pids or time.monotonic() > deadline:
            return pids
        held = _pidfds(pids)
        try:
            confirmed = set(find())
            kill_pidfds([fd for pid, fd in held.items() if pid in confirmed], wait_s=0)
        finally:
            for fd in held.values():
                os.close(fd)
        time.sleep(0.005)


def _pidfds(pids: list[int]) -> dict[int, int]:
    held = {}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            held[pid] = os.pidfd_open(pid)
    return held


def child_pidfds(parent: int) -> list[int]:
    """Pidfds of ``parent``'s children, each confirmed a child after it was opened (the
    caller must keep ``parent`` alive and unreaped meanwhile: then no pid can be recycled)."""
    held = _pidfds(children(parent))
    for pid in list(held):
        if parent_pid(pid) != parent:
            os.close(held.pop(pid))
    return list(held.values())


def kill_pidfds(pidfds: list[int], wait_s: float = 5.0) -> None:
    """SIGKILL the processes behind ``pidfds``, wait up to ``wait_s`` for them to end, and
    close the descriptors the caller took (:func:`child_pidfds`) when ``wait_s`` > 0."""
    for fd in pidfds:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    if wait_s <= 0:
        return
    deadline = time.monotonic() + wait_s
    for fd in pidfds:
        with contextlib.suppress(OSError):
            select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        os.close(fd)


class UidLease:
    """A user id that no other job on this host holds until :meth:`release`.

    The local sandbox, when it runs as root, runs each job as its own unprivileged uid: the
    per-user process limit (``RLIMIT_NPROC``) then counts that job alone, root's files are out
    of reach, and every process of the job can be found and killed by its uid. The lease is a
    ``flock`` on a file per uid, shared by every process on the host and released by the
    kernel if the holder dies.
    """

    FIRST_UID = 1_900_000_000
    COUNT = 4096

    def __init__(self, lock_dir: str | os.PathLike[str] | None = None) -> None:
        directory = Path(lock_dir or _default_lock_dir())
        directory.mkdir(mode=0o700, exist_ok=True)
        start = os.getpid() % self.COUNT  # spreads processes over the range
        for offset in range(self.COUNT):
            uid = self.FIRST_UID + (start + offset) % self.COUNT
            fd = os.open(directory / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid = uid
            self._fd: int | None = fd
            return
        raise RuntimeError(f"all {self.COUNT} sandbox uids are in use (locks in {directory})")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @classmethod
    def namespace_map(cls, root: int) -> str:
        """``uid_map`` lines for a user namespace whose 0 is the host's ``root`` and whose
        other ids are the leased ones, each itself (``root`` excepted, when it is one).

        >>> print(UidLease.namespace_map(UidLease.FIRST_UID + 1), end="")
        0 1900000001 1
        1900000000 1900000000 1
        1900000002 1900000002 4094
        """
        first, end = cls.FIRST_UID, cls.FIRST_UID + cls.COUNT
        pieces = [(first, root), (root + 1, end)] if first <= root < end else [(first, end)]
        lines = [f"0 {root} 1"] + [f"{a} {a} {b - a}" for a, b in pieces if b > a]
        return "".join(line + "\n" for line in lines)


def _default_lock_dir() -> str:
    base = "/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()
    return os.path.join(base, "wmrl-sandbox-uids")
