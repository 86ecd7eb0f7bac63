"""A job's work directory on the host: written before the run, read back safely after it.

The host reads what an untrusted program left behind, so :func:`collect_outputs` follows no
symbolic link (a ``score.json`` linked to ``/etc/shadow`` is refused, not read), opens only
regular files (a FIFO would block) and caps their size.

Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "score.json").write_text('{"score": 1}')
    >>> (root / "link.json").symlink_to("/etc/passwd")
    >>> collect_outputs(root, ["score.json", "link.json", "absent.json"], max_bytes=1024)
    ({'score.json': b'{"score": 1}'}, ['link.json is not a regular file'])
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from wmrl_env.sandboxes.job import Job

__all__ = [
    "check_inputs",
    "check_jobs",
    "collect_outputs",
    "copy_inputs",
    "job_environment",
    "owned_temp_dir",
    "prepare_workdir",
    "remove_stale_temp_dirs",
    "remove_tree",
]

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _open_below(root: Path, name: str) -> int:
    """Open ``root/name`` without following a symbolic link at any step."""
    parts = name.split("/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        return os.open(parts[-1], _READ_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def collect_outputs(
    root: Path, names: Iterable[str], max_bytes: int
) -> tuple[dict[str, bytes], list[str]]:
    """Read the declared output files under ``root``.

    Returns the files read (name -> content) and the problems: a file that is a link or not
    a regular file, or one over ``max_bytes``. A file that was not written is simply absent:
    the scorer decides whether that is acceptable.
    """
    outputs: dict[str, bytes] = {}
    problems: list[str] = []
    for name in names:
        try:
            fd = _open_below(root, name)
        except FileNotFoundError:
            continue
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
                problems.append(f"{name} is not a regular file")
            else:
                problems.append(f"{name} could not be read: {error.strerror}")
            continue
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            problems.append(f"{name} is not a regular file")
        elif info.st_size > max_bytes:
            os.close(fd)
            problems.append(f"{name} is {info.st_size} bytes, over the {max_bytes}-byte cap")
        else:
            with os.fdopen(fd, "rb") as file:
                outputs[name] = file.read(max_bytes)
    return outputs, problems


def prepare_workdir(
    workdir: Path, program: str, inputs: Mapping[str, str], *, copy: bool, uid: int | None
) -> None:
    """Write a job's ``main.py``, its ``.tmp`` and ``inputs`` directories (the inputs copied
    when ``copy``, else left for the sandbox to bind), owned by ``uid`` when given, 0700."""
    (workdir / "main.py").write_text(program, encoding="utf-8")
    (workdir / ".tmp").mkdir()
    if copy:
        copy_inputs(inputs, workdir / "inputs")
    else:
        (workdir / "inputs").mkdir()  # bwrap binds each input read-only below it
    if uid is not None:
        for path in (workdir, workdir / ".tmp"):
            os.chown(path, uid, uid)
    workdir.chmod(0o700)


def copy_inputs(inputs: Mapping[str, str | os.PathLike[str]], destination: Path) -> None:
    """Copy each input (file or directory) to ``destination/<name>``, read-only."""
    destination.mkdir(parents=True, exist_ok=True)
    for name, source in inputs.items():
        target = destination / name
        if os.path.isdir(source):
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target)
    for path in sorted(destination.rglob("*"), reverse=True):
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)
    destination.chmod(0o555)


def remove_tree(path: Path) -> None:
    """Delete a work directory, also the parts a job made unreadable to its owner.

    Only what lies inside ``path`` is ever made writable: a failure on ``path`` itself (it is
    gone, or a mount point) is raised as it is, and the folder that holds ``path`` (``/tmp``,
    say) keeps its mode.
    """
    root = os.path.realpath(path)

    def make_writable_and_retry(function, failed_path, error) -> None:
        parent = os.path.realpath(os.path.dirname(failed_path))
        if os.path.commonpath([root, parent]) != root:
            raise error[1] if isinstance(error, tuple) else error
        os.chmod(parent, 0o700)
        if os.path.isdir(failed_path) and not os.path.islink(failed_path):
            os.chmod(failed_path, 0o700)
        function(failed_path)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=make_writable_and_retry)
    else:
        shutil.rmtree(path, onerror=make_writable_and_retry)


def job_environment(job_dir: str, bin_dir: str, extra: Mapping[str, str]) -> dict[str, str]:
    """A job's whole environment: nothing is inherited from the host (no tokens, no
    credentials). ``job_dir`` is the work directory as the job sees it; ``bin_dir`` holds
    its ``python3``. One thread per BLAS/OpenMP pool: jobs run side by side, one per core.
    """
    environment = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": job_dir,
        "TMPDIR": f"{job_dir}/.tmp",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "JOBLIB_MULTIPROCESSING": "0",
        "WMRL_WORKDIR": job_dir,
        "WMRL_INPUTS": f"{job_dir}/inputs",
    }
    environment.update(extra)
    return environment


def check_inputs(inputs: Mapping[str, str | os.PathLike[str]]) -> dict[str, str]:
    """Validate a job's inputs (plain names, existing host paths); returns absolute paths.

    Raises:
        ValueError: naming the bad input.
    """
    checked = {}
    for name, source in inputs.items():
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise ValueError(f"input name {name!r} must be a plain file or directory name")
        path = os.path.abspath(os.fspath(source))
        if not os.path.exists(path):
            raise ValueError(f"input {name!r}: {path} does not exist")
        checked[name] = path
    return checked


def check_jobs(jobs: Iterable[object], executor: str) -> None:
    """Refuse what is not a :class:`Job` (``TypeError``) or has bad inputs (``ValueError``)
    before anything starts."""
    for job in jobs:
        if not isinstance(job, Job):
            raise TypeError(f"{executor} runs Job objects, got {type(job).__name__}")
        check_inputs(job.inputs)


def owned_temp_dir(prefix: str) -> Path:
    """A new temporary directory named after this process (``<prefix><pid>-XXXX``), so that
    :func:`remove_stale_temp_dirs` can tell when its owner is gone."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def remove_stale_temp_dirs(prefix: str) -> list[Path]:
    """Remove the directories :func:`owned_temp_dir` made for processes that no longer run
    (killed before they could clean up, e.g. a Ray worker cancelled with ``force=True``)."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = path.name[len(prefix) :].split("-")[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            remove_tree(path)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
