"""The warm server: a clean parent inside the sandbox that forks one fresh process per job.

This file runs *inside* bubblewrap as ``python3 -c <this source> <socket fd> <modules>``
(standard library only: it cannot import wmrl-env there). It imports the heavy libraries
once (numpy, scikit-learn, ...), then serves one job at a time over a Unix socket and never
runs user code itself. Per job it forks a chain that applies, from scratch, what a cold job
gets from bubblewrap and ``prlimit``:

- ``job`` (forked from the server): new mount, PID and IPC namespaces; the job's own work
  directory bound at ``/job``; every other job's directory (``/jobs``) covered;
- ``init`` (PID 1 of the new namespace): mounts the namespace's ``/proc``, starts the
  program, exits with its status; the kernel then kills every process left in the namespace;
- ``program``: resource limits, a new session, the job's uid (all capabilities dropped, no
  new privileges), the job's environment, streams, argv and a reseeded RNG; then ``main.py``.

Protocol (``SOCK_SEQPACKET``, one JSON message each): the server says ``{"ready": ...}``
once; the host sends a request with the job's stdout and stderr pipes attached
(``SCM_RIGHTS``); ``job`` answers ``{"init": pid}`` (the host kills that pid on timeout),
the server ``{"status": wait status}`` when the job ended.

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
import signal
import socket
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
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


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(encode(source), encode(target), encode(fstype), flags, None), target)


def _drop_bounding_set() -> None:
    """No capability can come back through an executed file (needs CAP_SETPCAP: first)."""
    for capability in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows (EINVAL)


def _drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets; no new privileges."""
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(header, data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _die_with_parent() -> None:
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")


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
    os.chdir(JOB_DIR)
    _drop_bounding_set()
    uid = request["uid"]
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _drop_capabilities()
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
        _run_program(request, streams)
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
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _mount(f"{JOBS_DIR}/{request['dir']}", JOB_DIR, None, MS_BIND | MS_REC)
        # an empty read-only tmpfs over the other jobs' directories (unmounting /jobs is not
        # allowed in a user namespace: the mount is locked)
        _mount("tmpfs", JOBS_DIR, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
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


def serve(control: socket.socket, modules: list[str]) -> None:
    """Import ``modules``, say ready, then run one job per request until the socket closes."""
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
    while True:
        message, streams, _, _ = socket.recv_fds(control, 1 << 20, 2)
        if not message:
            return
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            _job(request, streams, control)
        for fd in streams:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        control.send(json.dumps({"status": status}).encode())


if __name__ == "__main__":
    serve(
        socket.socket(fileno=int(sys.argv[1])),
        [name for name in sys.argv[2].split(",") if name],
    )
