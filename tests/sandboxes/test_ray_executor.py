"""RayExecutor on a local Ray instance (marker ``ray``): the contract and what is Ray's own.

The hostile-program suite and the ML job run on Ray too (``sandbox_factory``)."""

from __future__ import annotations

import pytest
from sandbox_testing import SandboxContract, score_job

from wmrl_env.executors import ExecStatus
from wmrl_env.sandboxes import Job, LocalSandbox, RayExecutor

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


class TestRayExecutorContract(SandboxContract):
    def make_executor(self) -> RayExecutor:
        return RayExecutor(inner="local", inner_kwargs={"timeout_s": 60})


def test_scorer_runs_on_the_driver_and_results_name_the_node() -> None:
    seen = []

    def scorer(outputs):  # a closure over driver state: it never travels to a worker
        seen.append(outputs["score.json"])
        return 1.0

    job = score_job(0.5)
    job = Job(job.program, output_files=job.output_files, scorer=scorer)
    with RayExecutor(inner="local", inner_kwargs={"timeout_s": 60}) as executor:
        [result] = executor.run([job])
    assert result.ok and result.score == 1.0 and seen == [b'{"score": 0.5}']
    assert result.metadata["backend"] == "local" and result.metadata["ray_node"]


def test_inner_factory_is_used() -> None:
    factory_calls = []

    def factory() -> LocalSandbox:
        factory_calls.append(1)  # runs in the worker: this list stays empty on the driver
        return LocalSandbox(timeout_s=30, max_workers=1, env={"FROM_FACTORY": "yes"})

    with RayExecutor(inner=factory) as executor:
        [result] = executor.run([Job("import os\nprint(os.environ['FROM_FACTORY'])")])
    assert result.stdout == "yes\n" and factory_calls == []


def test_worker_failure_is_an_error_result() -> None:
    def broken() -> LocalSandbox:
        raise RuntimeError("no sandbox on this node")

    with RayExecutor(inner=broken) as executor:
        [result] = executor.run([Job("pass")])
    assert result.status is ExecStatus.ERROR
    assert "no sandbox on this node" in result.message


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="inner"):
        RayExecutor(inner="kubernetes")
    with pytest.raises(ValueError, match="num_cpus_per_job"):
        RayExecutor(num_cpus_per_job=0)
