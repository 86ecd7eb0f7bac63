"""The first process of a warm Docker container: starts the warm server, reports usage.

This file runs *inside* the container as its PID 1, ``python3 -c <this source> <control
socket> <server source> <modules>`` (standard library only: wmrl-env is not installed there).
It connects to the host's control socket twice. The first connection goes to the warm
server (:mod:`wmrl_env.sandboxes.warm_server`, started as its child), which speaks the warm
pool's job protocol over it. The second stays here, for what the server cannot answer while
it waits for a job, and what the host cannot do itself (the server's pids are the
container's, not the host's):

- ``{"usage": true}``: answered ``{"usage": bytes, "pids": n}``, the container's memory and
  task count (cgroup), read once the server has imported its libraries.

Once both are connected it detaches the control directory (nothing of it is visible to the
jobs) and installs a seccomp filter (:func:`install_seccomp_filter`) that the server and
every job inherit: Docker's default profile lets a container that holds ``CAP_SYS_ADMIN``
(the hand-over needs it) make namespaces and count performance events, which a cold
container may not, and a job must not either. It exits, and the container with it, when the
server exits or the host closes the connection.

Example (the host side is :class:`wmrl_env.sandboxes.docker.warm.DockerWarmServer`):
    >>> cgroup_value(("/nonexistent/memory.current",))
    0
    >>> len(seccomp_program("x86_64")) // 8  # sock_filter instructions
    14
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

# seccomp: (audit arch, unshare, clone, clone3, perf_event_open) per machine
SYSCALLS = {
    "x86_64": (0xC000003E, 272, 56, 435, 298),
    "aarch64": (0xC00000B7, 97, 220, 435, 241),
}
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # classic BPF opcodes


def cgroup_value(paths: tuple[str, ...]) -> int:
    """The first readable integer among ``paths`` (cgroup v2, then v1), else 0."""
    for path in paths:
        with contextlib.suppress(OSError, ValueError), open(path) as file:
            return int(file.read())
    return 0


def seccomp_program(machine: str) -> bytes:
    """A classic-BPF seccomp program (``struct sock_filter`` array) for ``machine``: EPERM for
    ``unshare``/``clone`` with ``CLONE_NEWUSER``, for ``perf_event_open``, and for every
    syscall of another ABI (i386, x32); ENOSYS for ``clone3`` (its flags are out of a
    filter's reach; the C library then falls back to ``clone``); everything else allowed."""
    arch, unshare, clone, clone3, perf = SYSCALLS[machine]
    deny, no_such, check_flags, allow = 12, 13, 9, 8  # instruction indices
    program = [  # (code, jump if true, jump if false, k); jumps are absolute here
        (LD_ABS, 0, 0, 4),  # 0: the ABI
        (JEQ, 2, deny, arch),  # 1
        (LD_ABS, 0, 0, 0),  # 2: the syscall number
        (JGE, deny, 4, 0x40000000),  # 3: x32
        (JEQ, check_flags, 5, unshare),  # 4
        (JEQ, check_flags, 6, clone),  # 5
        (JEQ, no_such, 7, clone3),  # 6
        (JEQ, deny, allow, perf),  # 7
        (RET, 0, 0, RET_ALLOW),  # 8
        (LD_ABS, 0, 0, 16),  # 9: the low half of the first argument (little-endian)
        (JSET, deny, 11, CLONE_NEWUSER),  # 10
        (RET, 0, 0, RET_ALLOW),  # 11
        (RET, 0, 0, RET_ERRNO | EPERM),  # 12
        (RET, 0, 0, RET_ERRNO | ENOSYS),  # 13
    ]
    encoded = b""
    for index, (code, if_true, if_false, k) in enumerate(program):
        if code in (JEQ, JGE, JSET):  # a jump counts the instructions it skips
            if_true, if_false = if_true - index - 1, if_false - index - 1
        encoded += struct.pack("<HBBI", code, if_true, if_false, k)
    return encoded


def install_seccomp_filter() -> None:
    """Install :func:`seccomp_program` on this process (inherited by every child)."""
    libc = ctypes.CDLL(None, use_errno=True)
    program = seccomp_program(os.uname().machine)
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


def supervise(control: str, source: str, modules: str) -> int:
    """Start the server on a first connection, serve the host on a second; the server's
    exit status when it ends, 0 when the host closed the connection."""
    server_connection = _connect(control)
    requests = _connect(control)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(CONTROL_DIR.encode(), MNT_DETACH) != 0:
        print(f"cannot detach {CONTROL_DIR}: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 125
    install_seccomp_filter()
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
    sys.exit(supervise(sys.argv[1], sys.argv[2], sys.argv[3]))
