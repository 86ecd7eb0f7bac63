"""The local sandbox's isolation levels and the command lines that apply them (Linux only).

Three levels, best first; :class:`~wmrl_env.sandboxes.local.LocalSandbox` uses the best one
that works on this machine and says which in every result's ``metadata``:

``bwrap``
    Debian's ``bubblewrap``: new network (only a private loopback), PID, IPC and UTS
    namespaces; a root file system holding only the OS, the interpreter and the job, read-only
    except the work directory and a fresh, size-limited ``/dev/shm``; the seccomp denylist
    (:mod:`~wmrl_env.sandboxes.seccomp`); the whole namespace dies with the job.
``unshare``
    util-linux ``unshare``: no network and a PID namespace, but the host's file system.
``rlimits``
    resource limits only: network and file system are the host's.

Every level adds resource limits (``prlimit``) and, when the host process is root, runs the
job as a dedicated unprivileged uid (see :class:`~wmrl_env.sandboxes.processes.UidLease`).

Example:
    >>> [level.name for level in LEVELS]
    ['bwrap', 'unshare', 'rlimits']
    >>> LEVELS[0].metadata()["network"], LEVELS[2].metadata()["filesystem"]
    ('none', 'host')
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl_env.sandboxes.hidden_data import hidden_data_paths

__all__ = [
    "LEVELS",
    "SERVER_CAPABILITIES",
    "SHM_BYTES",
    "Interpreter",
    "Isolation",
    "JobCommand",
    "warm_server_argv",
]

JOB_DIR_IN_BWRAP = "/job"
JOBS_DIR_IN_BWRAP = "/jobs"  # the warm server's view of every job directory
SHM_BYTES = 64 << 20  # each job's own /dev/shm (RAM outside the address-space limit)
# what the warm server's hand-over needs: namespaces and mounts, the job's uid and gid, and
# emptying the job's capability bounding set
SERVER_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")

# read-only system paths a Python program needs inside bwrap: the OS, the dynamic loader's
# configuration, Debian's BLAS alternatives, users and time zone. Never /home, /root, /work.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/ssl/certs",
)


@dataclass(frozen=True)
class Interpreter:
    """The Python that runs jobs and the host directories it needs to start."""

    executable: str
    base_prefix: str  # the real path of its standard library's prefix
    prefixes: tuple[str, ...]  # every directory to expose: prefixes, install dir, packages

    @classmethod
    @functools.lru_cache(maxsize=8)
    def inspect(cls, executable: str) -> Interpreter:
        """Ask ``executable`` where it lives (venv and base prefixes)."""
        path = shutil.which(executable)
        if path is None:
            raise ValueError(f"Python interpreter {executable!r} not found")
        script = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.path]))"
        out = subprocess.run(
            [path, "-I", "-c", script], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        prefix, base_prefix, path_entries = json.loads(out)
        prefix, base_prefix = os.path.realpath(prefix), os.path.realpath(base_prefix)
        install_dir = os.path.dirname(os.path.dirname(os.path.realpath(path)))
        # package directories a .pth file adds (a venv layered on another venv's packages)
        packages = {
            os.path.realpath(entry)
            for entry in path_entries
            if os.path.basename(entry) in ("site-packages", "dist-packages")
            and os.path.isdir(entry)
        }
        prefixes = tuple(sorted({prefix, base_prefix, install_dir} | packages))
        return cls(os.path.abspath(path), base_prefix, prefixes)


@dataclass(frozen=True)
class JobCommand:
    """Everything the runner needs to start one job at a given isolation level."""

    interpreter: Interpreter
    workdir: Path
    inputs: Mapping[str, str]
    memory_bytes: int
    cpu_seconds: int
    max_processes: int
    max_file_bytes: int
    max_open_files: int
    uid: int | None  # drop to this uid (host process is root), else keep the caller's
    seccomp_fd: int | None = None  # bwrap installs the filter read from it (bwrap level only)


@dataclass(frozen=True)
class Isolation:
    """One isolation level: what it applies, and how to wrap a job's command in it."""

    name: str
    network: str  # "none": no route out of the sandbox; "host": the host's network
    filesystem: str  # "private": only the job's files visible and writable; "host"
    pid_namespace: bool  # the job's processes die together with it
    tool: str | None  # the program this level needs on PATH

    def available(self) -> bool:
        return self.tool is None or shutil.which(self.tool) is not None

    def metadata(self) -> dict[str, Any]:
        return {
            "isolation": self.name,
            "network": self.network,
            "filesystem": self.filesystem,
            "pid_namespace": self.pid_namespace,
        }

    def job_dir(self, workdir: Path) -> str:
        """The work directory as the job sees it."""
        return JOB_DIR_IN_BWRAP if self.name == "bwrap" else str(workdir)

    def argv(self, command: JobCommand) -> list[str]:
        """The full command line: limits, parent-death kill, isolation, uid drop, Python."""
        limits = [
            "prlimit",
            f"--as={command.memory_bytes}",
            f"--cpu={command.cpu_seconds}",
            f"--nproc={command.max_processes}",
            f"--fsize={command.max_file_bytes}",
            f"--nofile={command.max_open_files}",
            "--core=0",
            "--",
            "setpriv",
            "--pdeathsig=KILL",
            "--",
        ]
        drop = []
        if command.uid is not None:
            uid = str(command.uid)
            drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
            drop += ["--inh-caps=-all", "--bounding-set=-all", "--"]
        program = [command.interpreter.executable, "main.py"]
        if self.name == "bwrap":
            return limits + _bwrap_args(command) + drop + program
        if self.name == "unshare":
            # the job must not be PID 1 of its namespace (PID 1 ignores its own fatal signals),
            # so a shell stays in between and reports a signal as 128 + its number
            return limits + _unshare_args() + drop + ["sh", "-c", '"$@"; exit $?', "sh"] + program
        return limits + drop + program


LEVELS: tuple[Isolation, ...] = (
    Isolation("bwrap", "none", "private", True, "bwrap"),
    Isolation("unshare", "none", "host", True, "unshare"),
    Isolation("rlimits", "host", "host", False, None),
)


def _unshare_args() -> list[str]:
    args = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:
        args.insert(1, "--map-root-user")
    return args


def _ro_bind_with_parents(path: str, made: set[str]) -> list[str]:
    """Bind ``path`` read-only at the same place, creating traversable parents (bwrap would
    create them mode 0700, out of reach of the job's uid)."""
    args: list[str] = []
    parents = Path(path).parents
    for parent in reversed(parents[:-1]):  # skip "/"
        if str(parent) not in made:
            made.add(str(parent))
            args += ["--perms", "0755", "--dir", str(parent)]
    return [*args, "--ro-bind", path, path]


def _bwrap_args(command: JobCommand) -> list[str]:
    job = JOB_DIR_IN_BWRAP
    args = _bwrap_root(command.interpreter, pid_namespace=True)
    args += ["--bind", str(command.workdir), job]
    for name, source in command.inputs.items():
        args += ["--ro-bind", source, f"{job}/inputs/{name}"]
    if command.seccomp_fd is not None:
        args += ["--seccomp", str(command.seccomp_fd)]
    return [*args, "--chdir", job, "--remount-ro", "/"]


def warm_server_argv(interpreter: Interpreter, jobs_dir: Path, server: list[str]) -> list[str]:
    """bwrap around the warm server (:mod:`wmrl_env.sandboxes.warm_server`): the same root as
    a cold job's, every job directory under ``/jobs`` (each job binds its own at ``/job`` and
    covers ``/jobs`` in its own mount namespace), a PID namespace of its own (no host process
    in sight: the host asks the server to kill a job), and only the capabilities the server
    needs to make each job's namespaces and drop to its uid (:data:`SERVER_CAPABILITIES`,
    dropped by the job before user code), narrowed by bwrap before Python starts.
    """
    args = _bwrap_root(interpreter, pid_namespace=True)
    args += ["--bind", str(jobs_dir), JOBS_DIR_IN_BWRAP, "--dir", JOB_DIR_IN_BWRAP]
    args += ["--cap-drop", "ALL"]
    for capability in SERVER_CAPABILITIES:
        args += ["--cap-add", capability]
    args += ["--chdir", "/", "--remount-ro", "/"]
    return args + server


def _bwrap_root(interpreter: Interpreter, *, pid_namespace: bool) -> list[str]:
    """bwrap's namespaces and read-only root: the OS, the interpreter, /dev, /proc, /tmp."""
    args = ["bwrap", "--unshare-ipc", "--unshare-net", "--unshare-uts"]
    args += ["--unshare-pid"] if pid_namespace else []
    args += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if os.geteuid() != 0:
        args.append("--unshare-user")
    bound: list[str] = []
    made: set[str] = set()
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            bound.append(path)
    for path in _ETC_FILES + tuple(str(p) for p in sorted(Path("/etc").glob("python3*"))):
        args += _ro_bind_with_parents(path, made) if os.path.exists(path) else []
    for prefix in interpreter.prefixes:
        if not _below(prefix, bound):
            args += _ro_bind_with_parents(prefix, made)
            bound.append(prefix)
    args += _hide_datasets(interpreter, bound)
    args += ["--dev", "/dev", "--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    args += ["--remount-ro", "/dev"]  # nothing writable in /dev but device nodes and /dev/shm
    return [*args, "--proc", "/proc", "--perms", "0755", "--dir", "/tmp"]


def _below(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root + "/") for root in roots)


def _hide_datasets(interpreter: Interpreter, bound: list[str]) -> list[str]:
    """Cover the packages' dataset files (:mod:`~wmrl_env.sandboxes.hidden_data`) inside the
    bound directories: an empty read-only tmpfs over a directory, /dev/null over a file."""
    args: list[str] = []
    for path in hidden_data_paths(interpreter.executable):
        if not _below(path, bound):
            continue  # not in the sandbox at all
        if os.path.isdir(path):
            args += ["--perms", "0555", "--size", "4096", "--tmpfs", path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    return args
