"""The sandboxes' building blocks: scoring, outcome classification, output collection,
limits, uid leases and the job pool."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from wmrl_env.executors import ExecResult, ExecStatus
from wmrl_env.sandboxes import InvalidOutputError, Job, JsonScore
from wmrl_env.sandboxes.limits import SandboxLimits
from wmrl_env.sandboxes.outcome import ProcessOutcome, TailBuffer
from wmrl_env.sandboxes.pool import JobPool
from wmrl_env.sandboxes.processes import UidLease
from wmrl_env.sandboxes.scoring import apply_scorer
from wmrl_env.sandboxes.workdir import (
    collect_outputs,
    copy_inputs,
    owned_temp_dir,
    remove_stale_temp_dirs,
    remove_tree,
)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "was not written"),
        (b"\xff\xfe", "not valid JSON"),
        (b"{score: 1}", "not valid JSON"),
        (b"[1]", "JSON object, got list"),
        (b'{"other": 1}', "no 'score' field"),
        (b'{"score": true}', "finite number, got True"),
        (b'{"score": "0.9"}', "finite number, got '0.9'"),
        (b'{"score": NaN}', "finite number, got nan"),
        (b'{"score": Infinity}', "finite number, got inf"),
    ],
)
def test_json_score_refuses_what_is_not_a_score(content, reason) -> None:
    outputs = {} if content is None else {"score.json": content}
    with pytest.raises(InvalidOutputError, match=reason):
        JsonScore()(outputs)


def test_json_score_reads_numbers() -> None:
    assert JsonScore()({"score.json": b'{"score": 3}'}) == 3.0
    assert JsonScore("m.json", key="acc")({"m.json": b'{"acc": -0.25, "x": 1}'}) == -0.25
    assert JsonScore("m.json").files == ("m.json",)


def test_apply_scorer_passes_failures_and_unscored_jobs_through() -> None:
    crashed = ExecResult("a", ExecStatus.CRASHED, message="exit status 1")
    assert apply_scorer(crashed, JsonScore()) is crashed
    ok = ExecResult("b", ExecStatus.OK)
    assert apply_scorer(ok, None) is ok
    nan = apply_scorer(ok, lambda outputs: math.nan)
    assert nan.status is ExecStatus.INVALID_OUTPUT and "NaN" in nan.message


def test_tail_buffer_keeps_the_end_and_counts_everything() -> None:
    tail = TailBuffer(cap=10)
    for _ in range(100):
        tail.write(b"0123456789abc")
    assert tail.total == 1300 and tail.truncated
    assert tail.text() == "3456789abc"
    small = TailBuffer(cap=10)
    small.write("é".encode())
    assert small.text() == "é" and not small.truncated


@pytest.mark.parametrize(
    ("fields", "stderr", "status", "message"),
    [
        ({"cancelled": True, "timed_out": True}, "", ExecStatus.ERROR, "closed"),
        ({"timed_out": True, "signal": 9}, "", ExecStatus.TIMEOUT, "3 s exceeded"),
        ({"signal": signal.SIGXCPU}, "", ExecStatus.TIMEOUT, "CPU-time"),
        ({"oom_killed": True, "signal": 9}, "", ExecStatus.OUT_OF_MEMORY, "OOM killer"),
        ({"exit_code": 1}, "x\nMemoryError\n", ExecStatus.OUT_OF_MEMORY, "MemoryError"),
        (
            {"exit_code": 1},
            "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 8 GiB",
            ExecStatus.OUT_OF_MEMORY,
            "Unable to allocate",
        ),
        (
            {"exit_code": 1},
            "ImportError: x.so: failed to map segment from shared object",
            ExecStatus.OUT_OF_MEMORY,
            "failed to map segment",
        ),
        ({"exit_code": 0}, "MemoryError", ExecStatus.OK, ""),
        ({"signal": signal.SIGSEGV}, "", ExecStatus.CRASHED, "killed by SIGSEGV"),
        ({"exit_code": 2}, "", ExecStatus.CRASHED, "exit status 2"),
        (
            {"exit_code": 0, "output_problems": ["a is not a regular file"]},
            "",
            ExecStatus.INVALID_OUTPUT,
            "a is not a regular file",
        ),
    ],
)
def test_outcome_status_most_specific_cause_first(fields, stderr, status, message) -> None:
    outcome = ProcessOutcome(timeout_s=3, memory_mb=64, **fields)
    outcome.stderr.write(stderr.encode())
    got_status, got_message = outcome.status()
    assert got_status is status
    assert message in got_message


def test_outcome_result_carries_streams_and_facts() -> None:
    outcome = ProcessOutcome(exit_code=0, seconds=1.5)
    outcome.stdout.write(b"hello\n")
    result = outcome.to_result(Job("pass", job_id="j", tags={"t": 1}), {"backend": "x"})
    assert (result.job_id, result.status, result.stdout) == ("j", ExecStatus.OK, "hello\n")
    assert result.wall_seconds == result.exec_seconds == 1.5
    assert result.metadata["backend"] == "x" and result.metadata["tags"] == {"t": 1}
    assert result.metadata["stdout_bytes"] == 6


def test_collect_outputs_reads_files_and_refuses_tricks(tmp_path) -> None:
    (tmp_path / "ok.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.txt").write_text("deep")
    (tmp_path / "linked_dir").symlink_to("/etc")
    (tmp_path / "big.bin").write_bytes(b"0" * 101)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    names = ["ok.json", "sub/deep.txt", "linked_dir/passwd", "big.bin", "fifo", "dir", "absent"]
    outputs, problems = collect_outputs(tmp_path, names, max_bytes=100)
    assert outputs == {"ok.json": b"{}", "sub/deep.txt": b"deep"}
    assert problems == [
        "linked_dir/passwd is not a regular file",
        "big.bin is 101 bytes, over the 100-byte cap",
        "fifo is not a regular file",
        "dir is not a regular file",
    ]


def test_copy_inputs_copies_files_and_trees_read_only(tmp_path) -> None:
    (tmp_path / "a.csv").write_text("a")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "b.txt").write_text("b")
    copy_inputs({"a.csv": tmp_path / "a.csv", "tree": tmp_path / "tree"}, tmp_path / "in")
    assert (tmp_path / "in" / "tree" / "b.txt").read_text() == "b"
    assert not os.stat(tmp_path / "in" / "a.csv").st_mode & 0o222


@pytest.mark.parametrize(
    "fields",
    [{"timeout_s": -1}, {"memory_mb": 0}, {"max_processes": 1.5}, {"max_output_bytes": True}],
)
def test_limits_refuse_nonsense(fields) -> None:
    with pytest.raises(ValueError, match=next(iter(fields))):
        SandboxLimits(**fields)


def test_uid_leases_are_exclusive_until_released(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(UidLease, "COUNT", 8)
    first, second = UidLease(tmp_path), UidLease(tmp_path)
    assert first.uid != second.uid
    assert UidLease.FIRST_UID <= first.uid < UidLease.FIRST_UID + UidLease.COUNT
    taken = first.uid
    first.release()
    others = [UidLease(tmp_path) for _ in range(UidLease.COUNT - 1)]
    assert taken in {lease.uid for lease in others}  # free again
    with pytest.raises(RuntimeError, match="in use"):
        UidLease(tmp_path)
    for lease in [second, *others]:
        lease.release()


def test_pool_answers_every_job_even_when_the_backend_fails() -> None:
    def run_one(job, cancellation):
        if job.program == "bug":
            raise RuntimeError("backend bug")
        return ExecResult(job.job_id, ExecStatus.OK, score=1.0)

    pool = JobPool(run_one, 2, "test")
    good, bad = (f.result(timeout=10) for f in pool.submit([Job("pass"), Job("bug")]))
    pool.close()
    assert good.ok
    assert bad.status is ExecStatus.ERROR and "backend bug" in bad.message


def test_pool_close_kills_running_and_answers_queued_jobs() -> None:
    started, killed = threading.Event(), threading.Event()

    def run_one(job, cancellation):
        with cancellation.kill_on_cancel(killed.set):
            started.set()
            killed.wait(timeout=30)
        return ExecResult(job.job_id, ExecStatus.ERROR, message="killed")

    pool = JobPool(run_one, 1, "test")
    running, queued = pool.submit([Job("pass"), Job("pass")])
    assert started.wait(timeout=10)
    pool.close()
    assert killed.is_set()
    assert running.result(timeout=10).message == "killed"
    assert "before the job ran" in queued.result(timeout=10).message


def test_temp_dirs_of_dead_owners_are_removed() -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = Path(tempfile.mkdtemp(prefix=f"wmrl-test-stale-{finished.stdout.strip()}-"))
    (dead / "job").mkdir()
    mine = owned_temp_dir("wmrl-test-stale-")
    try:
        assert remove_stale_temp_dirs("wmrl-test-stale-") == [dead]
        assert not dead.exists() and mine.exists()
    finally:
        remove_tree(mine)


def test_remove_tree_never_changes_the_folder_that_holds_it(tmp_path) -> None:
    """A work directory that is already gone (or cannot be removed) raises, and the folder
    holding it — /tmp in practice — keeps its mode (it became 0700, which locked every other
    user out of /tmp)."""
    holder = tmp_path / "holder"
    holder.mkdir()
    holder.chmod(0o1777)
    with pytest.raises(FileNotFoundError):
        remove_tree(holder / "gone")
    assert holder.stat().st_mode & 0o7777 == 0o1777
    locked = holder / "job" / "locked"  # a job's unreadable part is still removed
    locked.mkdir(parents=True)
    (locked / "file").write_text("x")
    locked.chmod(0)
    remove_tree(holder / "job")
    assert not (holder / "job").exists() and holder.stat().st_mode & 0o7777 == 0o1777
