"""An optional result cache: a job identical to one already run is answered from disk.

Identical means the same program, timeout, output files and input *contents* on an executor
with the same settings (its type, limits and isolation facts), all hashed into one key.
Results are stored before scoring and scored on every return, so a changed scorer re-scores.
Only outcomes of the program itself are stored (``ok`` and ``crashed`` by default); a
timeout, an out-of-memory or an executor error may be the machine's fault and runs again.
Identical jobs within one batch run once.

Cost accounting: a hit is not a real execution, so it charges ``exec_seconds = 0`` and says
``metadata["cache"] == "hit"`` with the seconds it cost when it ran
(``recorded_exec_seconds``). Pass ``charge_hits=True`` to charge those recorded seconds
instead, e.g. to account a replayed experiment as if it had run.

Example:
    >>> import tempfile
    >>> from wmrl_env.sandboxes import Job, LocalSandbox
    >>> cached = CachedExecutor(LocalSandbox(timeout_s=20), tempfile.mkdtemp())
    >>> first, again = (cached.run([Job("print(6 * 7)")])[0] for _ in range(2))
    >>> first.metadata["cache"], again.metadata["cache"], again.stdout, again.exec_seconds
    ('miss', 'hit', '42\\n', 0.0)
    >>> cached.close()
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from wmrl_env.executors.base import BaseExecutor, ExecResult, ExecStatus, Executor
from wmrl_env.sandboxes.job import Job
from wmrl_env.sandboxes.scoring import apply_scorer

__all__ = ["CachedExecutor"]

logger = logging.getLogger(__name__)

_FORMAT = 1  # bump when the key or the stored record changes meaning


def _hash_path(path: str, digest: Any) -> None:
    """Feed a file's bytes, or a directory's relative names and bytes, into ``digest``."""
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                digest.update(os.path.relpath(full, path).encode() + b"\0")
                _hash_path(full, digest)
        return
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)


def _fingerprint(inner: Executor) -> str:
    """The settings of ``inner`` that can change a job's outcome."""
    facts: dict[str, Any] = {"type": type(inner).__name__}
    limits = getattr(inner, "limits", None)
    if limits is not None and hasattr(limits, "as_dict"):
        facts["limits"] = limits.as_dict()
    metadata = getattr(inner, "metadata", None)
    if isinstance(metadata, dict):
        facts["metadata"] = metadata
    return json.dumps(facts, sort_keys=True, default=str)


class CachedExecutor(BaseExecutor[Job]):
    """Wrap an executor with a content-hash result cache in ``cache_dir``.

    Args:
        inner: the executor that really runs missed jobs (closed with this one).
        cache_dir: where results are stored, one JSON file per key (created if missing).
        charge_hits: charge a hit the seconds it took when it ran, instead of 0.
        cache_statuses: the statuses worth storing.
        fingerprint: the executor's settings in the key (default: derived from ``inner``).
    """

    def __init__(
        self,
        inner: Executor,
        cache_dir: str | os.PathLike[str],
        *,
        charge_hits: bool = False,
        cache_statuses: Iterable[ExecStatus | str] = (ExecStatus.OK, ExecStatus.CRASHED),
        fingerprint: str | None = None,
    ) -> None:
        self.inner = inner
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.charge_hits = charge_hits
        self.cache_statuses = frozenset(ExecStatus(s) for s in cache_statuses)
        self._fingerprint = fingerprint if fingerprint is not None else _fingerprint(inner)

    def key(self, job: Job) -> str:
        """The content hash that identifies ``job``'s outcome on this executor."""
        digest = hashlib.sha256(f"wmrl-cache-{_FORMAT}\0{self._fingerprint}\0".encode())
        digest.update(json.dumps([job.program, list(job.output_files), job.timeout_s]).encode())
        for name in sorted(job.inputs):
            digest.update(f"\0input\0{name}\0".encode())
            _hash_path(os.fspath(job.inputs[name]), digest)
        return digest.hexdigest()

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _load(self, key: str) -> ExecResult | None:
        try:
            record = json.loads(self._path(key).read_text())
            record["outputs"] = {
                name: base64.b64decode(data) for name, data in record["outputs"].items()
            }
            return ExecResult(**record)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError) as error:
            logger.warning("ignoring unreadable cache entry %s: %r", key, error)
            return None

    def _store(self, key: str, result: ExecResult) -> None:
        record = dataclasses.asdict(result)
        record["status"] = result.status.value
        record["outputs"] = {n: base64.b64encode(d).decode() for n, d in result.outputs.items()}
        record["metadata"] = {k: v for k, v in result.metadata.items() if k not in ("tags",)}
        path = self._path(key)
        path.parent.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as file:
            json.dump(record, file, default=str)
        os.replace(file.name, path)  # atomic: a reader sees the old entry or the new one

    def _answer(self, job: Job, stored: ExecResult, how: str, seconds: float) -> ExecResult:
        """``stored`` as the result of ``job``: ``how`` is "miss" (it just ran), "hit" (from
        the cache) or "duplicate" (an identical job of the same batch ran)."""
        ran = how == "miss"
        metadata = {k: v for k, v in stored.metadata.items() if k not in ("cache", "tags")}
        metadata["cache"] = how
        if not ran:
            metadata["recorded_exec_seconds"] = stored.exec_seconds
        if job.tags:
            metadata["tags"] = dict(job.tags)
        result = dataclasses.replace(
            stored,
            job_id=job.job_id,
            wall_seconds=stored.wall_seconds if ran else seconds,
            exec_seconds=stored.exec_seconds if (ran or self.charge_hits) else 0.0,
            metadata=metadata,
        )
        return apply_scorer(result, job.scorer)

    def _submit(self, jobs: list[Job]) -> list[Future[ExecResult]]:
        futures: list[Future[ExecResult]] = []
        waiting: dict[str, list[tuple[Job, Future[ExecResult]]]] = {}
        for job in jobs:
            start = time.monotonic()
            key = self.key(job)
            future: Future[ExecResult] = Future()
            future.set_running_or_notify_cancel()
            futures.append(future)
            stored = self._load(key)
            if stored is not None:
                seconds = time.monotonic() - start
                future.set_result(self._answer(job, stored, "hit", seconds))
            else:
                waiting.setdefault(key, []).append((job, future))
        if waiting:
            keys = list(waiting)
            first_jobs = [dataclasses.replace(waiting[k][0][0], scorer=None) for k in keys]
            for key, inner_future in zip(keys, self.inner.submit(first_jobs), strict=True):
                inner_future.add_done_callback(
                    lambda done, key=key: self._finish(key, done.result(), waiting[key])
                )
        return futures

    def _finish(
        self, key: str, result: ExecResult, jobs: list[tuple[Job, Future[ExecResult]]]
    ) -> None:
        if result.status in self.cache_statuses:
            try:
                self._store(key, result)
            except OSError as error:  # a full disk must not lose the finished run
                logger.warning("could not store cache entry %s: %r", key, error)
        for index, (job, future) in enumerate(jobs):
            future.set_result(self._answer(job, result, "duplicate" if index else "miss", 0.0))

    def _close(self) -> None:
        self.inner.close()
