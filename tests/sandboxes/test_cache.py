"""CachedExecutor: keys by content, stores unscored outcomes, charges hits honestly."""

from __future__ import annotations

import tempfile
from concurrent.futures import Future

import pytest
from sandbox_testing import SCORE, SandboxContract

from wmrl_env.executors import BaseExecutor, ExecResult, ExecStatus
from wmrl_env.sandboxes import CachedExecutor, Job, LocalSandbox


class TestCachedLocalSandboxContract(SandboxContract):
    def make_executor(self) -> CachedExecutor:
        return CachedExecutor(LocalSandbox(timeout_s=30), tempfile.mkdtemp())


class CountingExecutor(BaseExecutor[Job]):
    """A stand-in inner executor: answers from a table of programs, counts what it ran."""

    def __init__(self, outcomes: dict[str, ExecResult]) -> None:
        self.outcomes = outcomes
        self.ran: list[str] = []

    def _submit(self, jobs):
        futures = []
        for job in jobs:
            self.ran.append(job.program)
            template = self.outcomes[job.program]
            future: Future[ExecResult] = Future()
            future.set_result(
                ExecResult(
                    job.job_id,
                    template.status,
                    wall_seconds=2.5,
                    exec_seconds=2.5,
                    outputs=template.outputs,
                    message=template.message,
                    metadata={"backend": "counting"},
                )
            )
            futures.append(future)
        return futures

    def _close(self) -> None:
        pass


OUTCOMES = {
    "good": ExecResult("", ExecStatus.OK, outputs={"score.json": b'{"score": 0.7}'}),
    "crash": ExecResult("", ExecStatus.CRASHED, message="exit status 1"),
    "slow": ExecResult("", ExecStatus.TIMEOUT, message="wall-clock limit"),
}


def job(program: str, **kwargs) -> Job:
    return Job(program, output_files=SCORE.files, scorer=SCORE, **kwargs)


@pytest.fixture
def counting():
    return CountingExecutor(OUTCOMES)


def test_hit_is_free_unless_charged(counting, tmp_path) -> None:
    cached = CachedExecutor(counting, tmp_path)
    [miss] = cached.run([job("good")])
    [hit] = cached.run([job("good", tags={"step": 2})])
    assert counting.ran == ["good"]
    assert (miss.metadata["cache"], miss.exec_seconds, miss.score) == ("miss", 2.5, 0.7)
    assert (hit.metadata["cache"], hit.exec_seconds, hit.score) == ("hit", 0.0, 0.7)
    assert hit.metadata["recorded_exec_seconds"] == 2.5
    assert hit.metadata["tags"] == {"step": 2} and hit.metadata["backend"] == "counting"
    [charged] = CachedExecutor(counting, tmp_path, charge_hits=True).run([job("good")])
    assert charged.metadata["cache"] == "hit" and charged.exec_seconds == 2.5


def test_identical_jobs_in_a_batch_run_once(counting, tmp_path) -> None:
    first, second = CachedExecutor(counting, tmp_path).run([job("good"), job("good")])
    assert counting.ran == ["good"]
    assert (first.metadata["cache"], second.metadata["cache"]) == ("miss", "duplicate")
    assert second.exec_seconds == 0.0 and second.score == first.score


def test_hits_are_rescored_with_the_current_scorer(counting, tmp_path) -> None:
    cached = CachedExecutor(counting, tmp_path)
    cached.run([job("good")])
    [rescored] = cached.run([Job("good", output_files=SCORE.files, scorer=lambda o: 5.0)])
    assert rescored.score == 5.0 and counting.ran == ["good"]


def test_only_the_programs_own_outcomes_are_stored(counting, tmp_path) -> None:
    cached = CachedExecutor(counting, tmp_path)
    for _ in range(2):
        cached.run([job("crash"), job("slow")])
    assert counting.ran == ["crash", "slow", "slow"]  # a timeout may be the machine's fault


def test_key_follows_input_contents_not_paths(counting, tmp_path) -> None:
    cached = CachedExecutor(counting, tmp_path / "cache")
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("1,2\n")
    second.write_text("1,2\n")
    assert cached.key(job("good", inputs={"d.csv": first})) == cached.key(
        job("good", inputs={"d.csv": second})
    )
    before = cached.key(job("good", inputs={"d.csv": first}))
    first.write_text("1,3\n")
    assert cached.key(job("good", inputs={"d.csv": first})) != before
    assert cached.key(job("good", timeout_s=3)) != cached.key(job("good"))


def test_executor_settings_are_part_of_the_key(tmp_path) -> None:
    with LocalSandbox(timeout_s=5) as short, LocalSandbox(timeout_s=50) as long:
        keys = {CachedExecutor(s, tmp_path).key(Job("pass")) for s in (short, long)}
    assert len(keys) == 2


def test_unreadable_entry_is_a_miss(counting, tmp_path) -> None:
    cached = CachedExecutor(counting, tmp_path)
    cached.run([job("good")])
    [entry] = tmp_path.rglob("*.json")
    entry.write_text("{truncated")
    [again] = cached.run([job("good")])
    assert again.ok and again.metadata["cache"] == "miss" and len(counting.ran) == 2
