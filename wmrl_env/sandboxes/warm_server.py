"""The warm server: a clean parent inside the sandbox that forks one fresh process per job.

This file runs *inside* bubblewrap as ``python3 -c <this source> <socket fd> <modules>
[<id map>]`` (standard library only: it cannot import wmrl-env there). It imports the heavy
libraries once (numpy, scikit-learn, ...), then serves one job at a time over a Unix socket
and never runs user code itself. Per job it forks a chain that applies, from scratch, what a
cold job gets from bubblewrap and ``prlimit``:

- ``job`` (forked from the server): new mount, PID and IPC namespaces; the job's own work
  directory bound at ``/job``; every other job's directory (``/jobs``) covered; a fresh,
  size-limited ``/dev/shm`` and the rest of ``/dev`` read-only;
- ``init`` (PID 1 of the new namespace): mounts the namespace's ``/proc``, starts the
  program, exits with its status; the kernel then kills every process left in the namespace;
- ``program``: resource limits, a new session, the job's uid (all capabilities dropped, no
  new privileges), the seccomp denylist, the job's environment, streams, argv and a reseeded
  RNG; then ``main.py``.

The server itself holds only what this hand-over needs (bubblewrap gives it
``CAP_SYS_ADMIN``, ``CAP_SETUID``, ``CAP_SETGID`` and ``CAP_SETPCAP``, nothing else, before
Python starts) and lives in a PID namespace of its own: no host process is in its sight.
Those capabilities count in the server's user namespace only: without root, bubblewrap makes
one; started by root (given an ``<id map>``), the server moves into one of its own before it
imports anything, root there and an unprivileged uid of its own outside, with the jobs' uids
mapped to themselves.

Protocol (``SOCK_SEQPACKET``, one JSON message each): the server says ``{"ready": ...}``
once; the host sends a request with the job's stdout and stderr pipes attached
(``SCM_RIGHTS``); ``job`` answers ``{"init": pid}`` (a pid in the server's namespace, for
information), the server ``{"status": wait status}`` when the job ended and every process of
it is gone. ``{"kill": true}`` from the host kills the running job (the server kills its own
unreaped child, so no recycled pid can be hit; one that arrives after the job ended is
ignored). Optional request fields: ``seccomp`` (the filter's bytes, hex), ``shm_bytes``.

Example (the host side is :class:`wmrl_env.sandboxes.warm.WarmServer`):
    >>> exit_code(0), exit_code(3 << 8), exit_code(9)
    (0, 3, 137)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import socket
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
# statvfs f_flag bits -> the mount flags a read-only remount must keep (locked in a user ns)
_KEPT_FLAGS = {1: 1, 2: 2, 4: 4, 8: 8, 1024: 1024, 2048: 2048, 4096: 1 << 21}
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 24, 22, 38
PR_SET_CHILD_SUBREAPER = 36
SECCOMP_MODE_FILTER = 2
SHM_BYTES = 64 << 20  # the default size of each job's /dev/shm
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
JOB_DIR, JOBS_DIR = "/job", "/jobs"
LIMITS = {
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    args = (encode(source), encode(target), encode(fstype), flags, encode(data))
    _check(_libc.mount(*args), target)


def _remount_read_only(target: str) -> None:
    """Make the mount at ``target`` read-only in this mount namespace (not its submounts)."""
    kept = os.statvfs(target).f_flag
    flags = sum(mount for bit, mount in _KEPT_FLAGS.items() if kept & bit)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def _fresh_dev_shm(size: int) -> None:
    """A new, empty ``/dev/shm`` of at most ``size`` bytes for this job; the rest of ``/dev``
    read-only (its device nodes keep their own permissions)."""
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    _remount_read_only("/dev")


def _drop_bounding_set(keep: int = 0) -> None:
    """No capability outside the mask ``keep`` can come back through an executed file
    (needs CAP_SETPCAP: first)."""
    for capability in range(64):
        if keep >> capability & 1:
            continue
        if _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows (EINVAL)


def _permitted() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapPrm:"):
                return int(line.split()[1], 16)
    return 0


def _set_capabilities(mask: int) -> None:
    """Effective and permitted sets ``mask``, inheritable empty."""
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    low, high = mask & 0xFFFFFFFF, mask >> 32
    data = (ctypes.c_uint32 * 6)(low, low, 0, high, high, 0)  # effective, permitted, inheritable
    _check(_libc.capset(header, data), "capset")


def _drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets; no new privileges."""
    _set_capabilities(0)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _uncover_proc() -> None:
    """Unmount what bubblewrap bound over parts of ``/proc`` (``/proc/sys``, ...: read-only
    for a server that is root in the host's user namespace). Below a user namespace of the
    server's own they would be locked, and the kernel lets a job mount its ``/proc`` only
    where one is fully visible; root's files there are out of the server's reach anyway."""
    with open("/proc/self/mountinfo") as mounts:
        points = [line.split()[4] for line in mounts]
    for point in sorted((p for p in points if p.startswith("/proc/")), reverse=True):
        _check(_libc.umount2(point.encode(), MNT_DETACH), f"umount {point}")


def _enter_user_namespace(id_map: str) -> None:
    """Become root of a user namespace of this process's own, with the capabilities it holds
    now and no more: a server started by root then holds none outside that namespace.

    ``id_map`` (``/proc/<pid>/uid_map`` lines, used for the gids too) maps the namespace's 0
    to an unprivileged id and the jobs' ids to themselves. A process may map no id but its
    own from inside, so a child that stays outside (with ``CAP_SETUID`` and ``CAP_SETGID``
    there) writes the maps.
    """
    keep = _permitted()
    _uncover_proc()
    entered, say_entered = os.pipe()
    writer = os.fork()
    if writer == 0:
        os.close(say_entered)
        code = 1
        try:
            if os.read(entered, 1):  # the parent is in its new namespace
                for name in ("uid_map", "gid_map"):
                    fd = os.open(f"/proc/{os.getppid()}/{name}", os.O_WRONLY)
                    os.write(fd, id_map.encode())  # one write, as the kernel wants it
                    os.close(fd)
                code = 0
        except BaseException as error:  # reported in the server's log
            os.write(2, f"warm sandbox: mapping the server's ids: {error!r}\n".encode())
        os._exit(code)
    os.close(entered)
    try:
        _check(_libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
        os.write(say_entered, b"1")
    finally:
        os.close(say_entered)
        _, status = os.waitpid(writer, 0)
    if status != 0:
        raise OSError(f"writing the user namespace's id maps failed (status {status})")
    os.setresgid(0, 0, 0)
    os.setgroups([])  # the host's supplementary groups (root's) would stay otherwise
    os.setresuid(0, 0, 0)
    # a new user namespace starts with every capability in it: back to what bwrap left
    _set_capabilities(keep)
    _drop_bounding_set(keep=keep)


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _die_with_parent() -> None:
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _install_seccomp(program: bytes) -> None:
    """Install a classic-BPF seccomp filter (needs no_new_privs, set just before)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def _vm_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _run_program(request: dict, streams: list[int]) -> None:
    """Become the job's program: limits, session, uid, environment, streams; run main.py."""
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(streams[0], 1)
    os.dup2(streams[1], 2)
    os.closerange(3, 65536)
    os.setsid()
    for name, value in request["limits"].items():
        resource.setrlimit(LIMITS[name], (value, value))
    _drop_bounding_set()
    uid = request["uid"]
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _drop_capabilities()
    if request.get("seccomp"):
        _install_seccomp(bytes.fromhex(request["seccomp"]))
    os.chdir(JOB_DIR)  # the job's uid owns it (the server may not read it: no DAC override)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["main.py"]
    sys.path[0] = JOB_DIR
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
    sys.stdout.reconfigure(write_through=True)
    sys.stderr.reconfigure(write_through=True, errors="backslashreplace")
    if "numpy" in sys.modules:  # the legacy global RNG was seeded once, in the server
        sys.modules["numpy"].random.seed()
    code = _run_main(f"{JOB_DIR}/main.py")
    os._exit(code)


def _run_main(path: str) -> int:
    """Run ``path`` as ``__main__`` and exit the way ``python3 path`` would."""
    import atexit
    import runpy
    import threading
    import traceback

    try:
        try:
            runpy.run_path(path, run_name="__main__")
            code = 0
        finally:
            threading._shutdown()  # wait for non-daemon threads, as interpreter exit does
    except SystemExit as stop:
        code = _system_exit_code(stop.code)
    except BaseException as error:  # print it as the interpreter would, from main.py on
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename != path:
            trace = trace.tb_next
        traceback.print_exception(type(error), error, trace or error.__traceback__)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream changes nothing now
            stream.flush()
    return code


def _system_exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _init(request: dict, streams: list[int]) -> None:
    """PID 1 of the job's namespace: start the program, exit with its status."""
    _die_with_parent()
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    program = os.fork()
    if program == 0:
        try:
            _run_program(request, streams)  # exits; returns only by raising, before main.py
        except BaseException as error:  # fd 2 is the job's stderr once the streams are set
            os.write(2, f"warm sandbox: the program could not start: {error!r}\n".encode())
        os._exit(125)
    for fd in streams:
        os.close(fd)
    while True:  # reap orphans until the program itself ends
        pid, status = os.wait()
        if pid == program:
            os._exit(exit_code(status))


def _job(request: dict, streams: list[int], control: socket.socket) -> None:
    """The job's own namespaces and work directory, then its PID 1."""
    try:
        _die_with_parent()
        os.setpgid(0, 0)  # the server kills this group: this process and its PID 1
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _mount(f"{JOBS_DIR}/{request['dir']}", JOB_DIR, None, MS_BIND | MS_REC)
        # an empty read-only tmpfs over the other jobs' directories (unmounting /jobs is not
        # allowed in a user namespace: the mount is locked)
        _mount("tmpfs", JOBS_DIR, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _fresh_dev_shm(request.get("shm_bytes", SHM_BYTES))
        init = os.fork()
        if init == 0:
            control.close()
            _init(request, streams)
        control.send(json.dumps({"init": init}).encode())
        _, status = os.waitpid(init, 0)
        os._exit(exit_code(status))
    except BaseException as error:  # report it, never return into the server
        os.write(streams[1], f"warm sandbox: the job could not start: {error!r}\n".encode())
        os._exit(125)


def serve(control: socket.socket, modules: list[str], id_map: str = "") -> None:
    """Import ``modules``, say ready, then run one job per request until the socket closes;
    with ``id_map``, in a user namespace of its own (:func:`_enter_user_namespace`)."""
    _drop_bounding_set(keep=_permitted())  # bubblewrap narrowed the other sets, not this one
    if id_map:
        _enter_user_namespace(id_map)
    bare = _vm_bytes()
    imported, failed = [], {}
    for name in modules:
        try:
            __import__(name)
            imported.append(name)
        except Exception as error:  # a missing library is reported, not fatal
            failed[name] = repr(error)
    ready = {"ready": True, "imported": imported, "failed": failed}
    ready["preloaded_bytes"] = max(_vm_bytes() - bare, 0)
    control.send(json.dumps(ready).encode())
    # orphans of a killed job (its PID 1) come back to the server, which reaps them
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    while True:
        message, streams, _, _ = socket.recv_fds(control, 1 << 20, 2)
        if not message:
            return
        request = json.loads(message)
        if request.get("kill"):
            continue  # for a job that has already ended
        pid = os.fork()
        if pid == 0:
            _job(request, streams, control)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done by the job: whichever runs first
        for fd in streams:
            os.close(fd)
        if not _wait_or_kill(pid, control):
            return
        _, status = os.waitpid(pid, 0)
        _reap_all()
        control.send(json.dumps({"status": status}).encode())


def _wait_or_kill(pid: int, control: socket.socket) -> bool:
    """Wait until the job ``pid`` ends, killing it when the host says so; False (after
    killing it) when the host is gone."""
    ended = os.pidfd_open(pid)
    try:
        while True:
            readable, _, _ = select.select([ended, control], [], [])
            if ended in readable:
                return True
            message = control.recv(1 << 16)
            if not message or json.loads(message).get("kill"):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # an unreaped child: never a recycled pid
            if not message:
                os.waitpid(pid, 0)
                _reap_all()
                return False
    finally:
        os.close(ended)


def _reap_all() -> None:
    """Wait for every remaining child (a killed job's PID 1: its namespace dies with it)."""
    with contextlib.suppress(ChildProcessError):
        while True:
            os.waitpid(-1, 0)


if __name__ == "__main__":
    serve(
        socket.socket(fileno=int(sys.argv[1])),
        [name for name in sys.argv[2].split(",") if name],
        sys.argv[3] if len(sys.argv) > 3 else "",
    )
