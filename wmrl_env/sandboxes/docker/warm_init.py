"""The first process of a warm Docker container: starts the warm server, reports usage.

This file runs *inside* the container as its PID 1, ``python3 -c <this source> <control
socket> <server source> <modules> <seccomp filter>`` (standard library only: wmrl-env is not
installed there).
It connects to the host's control socket twice. The first connection goes to the warm
server (:mod:`wmrl_env.sandboxes.warm_server`, started as its child), which speaks the warm
pool's job protocol over it. The second stays here, for what the server cannot answer while
it waits for a job, and what the host cannot do itself (the server's pids are the
container's, not the host's):

- ``{"usage": true}``: answered ``{"usage": bytes, "pids": n}``, the container's memory and
  task count (cgroup), read once the server has imported its libraries.

Once both are connected it detaches the control directory (nothing of it is visible to the
jobs) and installs the seccomp filter the host built
(:func:`~wmrl_env.sandboxes.seccomp.server_program`), which the server and every job inherit:
Docker's default profile lets a container that holds ``CAP_SYS_ADMIN`` (the hand-over needs
it) make user namespaces and count performance events, which a cold container may not, and
the server must not either (each job's program installs the full denylist on top). It exits,
and the container with it, when the server exits or the host closes the connection.

Example (the host side is :class:`wmrl_env.sandboxes.docker.warm.DockerWarmServer`):
    >>> cgroup_value(("/nonexistent/memory.current",))
    0
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import socket
import struct
import sys

CONTROL_DIR = "/wmrl-control"
MNT_DETACH = 2
MEMORY_FILES = ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes")
PIDS_FILES = ("/sys/fs/cgroup/pids.current", "/sys/fs/cgroup/pids/pids.current")
_REAP_SECONDS = 5.0  # how often orphans reparented to PID 1 are reaped without a wake-up
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def cgroup_value(paths: tuple[str, ...]) -> int:
    """The first readable integer among ``paths`` (cgroup v2, then v1), else 0."""
    for path in paths:
        with contextlib.suppress(OSError, ValueError), open(path) as file:
            return int(file.read())
    return 0


def install_seccomp_filter(program: bytes) -> None:
    """Install ``program`` (a classic-BPF ``struct sock_filter`` array) on this process
    (inherited by every child), after ``no_new_privs``."""
    libc = ctypes.CDLL(None, use_errno=True)
    instructions = ctypes.create_string_buffer(program, len(program))
    # struct sock_fprog: the number of instructions, then a pointer to them
    header = ctypes.create_string_buffer(
        struct.pack("HxxxxxxQ", len(program) // 8, ctypes.addressof(instructions))
    )
    if (
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, header, 0, 0) != 0
    ):
        error = ctypes.get_errno()
        raise OSError(error, f"installing the seccomp filter: {os.strerror(error)}")


def _connect(path: str) -> socket.socket:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    connection.connect(path)
    return connection


def _start_server(connection: socket.socket, source: str, modules: str) -> int:
    pid = os.fork()
    if pid == 0:
        os.set_inheritable(connection.fileno(), True)
        argv = [sys.executable, "-c", source, str(connection.fileno()), modules]
        os.execv(sys.executable, argv)
    return pid


def _answer(requests: socket.socket) -> bool:
    """Serve one request from the host; False when the host has gone."""
    data = requests.recv(1 << 12)
    if not data:
        return False
    message = json.loads(data)
    if message.get("usage"):
        usage = {"usage": cgroup_value(MEMORY_FILES), "pids": cgroup_value(PIDS_FILES)}
        requests.send(json.dumps(usage).encode())
    return True


def supervise(control: str, source: str, modules: str, seccomp: str) -> int:
    """Start the server on a first connection, serve the host on a second; the server's
    exit status when it ends, 0 when the host closed the connection. ``seccomp``: the
    filter for the server and the jobs, hex."""
    server_connection = _connect(control)
    requests = _connect(control)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(CONTROL_DIR.encode(), MNT_DETACH) != 0:
        print(f"cannot detach {CONTROL_DIR}: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 125
    install_seccomp_filter(bytes.fromhex(seccomp))
    server = _start_server(server_connection, source, modules)
    server_connection.close()
    server_exit = os.pidfd_open(server)
    while True:
        ready, _, _ = select.select([requests, server_exit], [], [], _REAP_SECONDS)
        if requests in ready and not _answer(requests):
            return 0
        code = _reap(server)
        if code is not None:
            return code


def _reap(server: int) -> int | None:
    """Reap every child that ended (the server, or an orphan reparented to PID 1); the
    server's exit status (128 + the signal if killed) when it was among them."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return None
        if pid == server:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(supervise(*sys.argv[1:5]))
