"""LocalSandbox: the shared Executor contract, real ML jobs, isolation levels and their honesty."""

from __future__ import annotations

import math
import os
import socket
import warnings

import pytest
from sandbox_testing import SCORE, SandboxContract, assert_no_process_with, marked

from wmrl_env.executors import ExecStatus
from wmrl_env.sandboxes import InvalidOutputError, Job, LocalSandbox, SandboxUnavailableError
from wmrl_env.sandboxes import isolation as isolation_module
from wmrl_env.sandboxes import local as local_module


class TestLocalSandboxContract(SandboxContract):
    def make_executor(self) -> LocalSandbox:
        return LocalSandbox(timeout_s=30, memory_mb=512)


@pytest.fixture(scope="module")
def sandbox():
    with LocalSandbox(timeout_s=30, memory_mb=1024) as sandbox:
        yield sandbox


def test_default_isolation_is_reported(sandbox) -> None:
    [result] = sandbox.run([Job("print('hi')")])
    assert result.ok and result.stdout == "hi\n"
    for key in ("isolation", "network", "filesystem", "uid", "process_limit"):
        assert key in result.metadata
    assert result.metadata == {**result.metadata, **sandbox.metadata}
    assert sandbox.live_processes() == []


def test_host_environment_is_not_inherited(sandbox, monkeypatch) -> None:
    monkeypatch.setenv("WMRL_TEST_SECRET_TOKEN", "hunter2")
    program = "import os\nprint(sorted(os.environ))\nprint(os.environ['TMPDIR'])"
    [result] = sandbox.run([Job(program)])
    assert result.ok, result
    assert "WMRL_TEST_SECRET_TOKEN" not in result.stdout and "hunter2" not in result.stdout
    assert "WMRL_INPUTS" in result.stdout


def test_sandbox_env_is_passed(monkeypatch) -> None:
    with LocalSandbox(timeout_s=20, env={"TASK_SEED": "7"}) as sandbox:
        [result] = sandbox.run([Job("import os\nprint(os.environ['TASK_SEED'])")])
    assert result.stdout == "7\n"


def test_job_timeout_overrides_the_sandbox_default(sandbox) -> None:
    [result] = sandbox.run([Job("import time\ntime.sleep(30)", timeout_s=1)])
    assert result.status is ExecStatus.TIMEOUT
    assert "1 s" in result.message and result.wall_seconds < 10


def test_killed_by_a_signal_is_crashed(sandbox) -> None:
    [result] = sandbox.run([Job("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")])
    assert result.status is ExecStatus.CRASHED
    assert result.message == "killed by SIGSEGV"


def test_output_symlink_is_refused_not_followed(sandbox) -> None:
    program = "import os\nos.symlink('/etc/passwd', 'score.json')"
    [result] = sandbox.run([Job(program, output_files=SCORE.files, scorer=SCORE)])
    assert result.status is ExecStatus.INVALID_OUTPUT
    assert result.outputs == {} and "not a regular file" in result.message


def test_scorer_verdicts(sandbox) -> None:
    def refuse(outputs):
        raise InvalidOutputError("answer has the wrong shape")

    def buggy(outputs):
        raise KeyError("oops")

    refused, failed, unscored = sandbox.run(
        [Job("pass", scorer=refuse), Job("pass", scorer=buggy), Job("pass")]
    )
    assert refused.status is ExecStatus.INVALID_OUTPUT
    assert refused.message == "answer has the wrong shape"
    assert failed.status is ExecStatus.ERROR and "KeyError" in failed.message
    assert unscored.ok and math.isnan(unscored.score)


def test_tags_are_carried_into_metadata(sandbox) -> None:
    [result] = sandbox.run([Job("pass", tags={"task_id": "iris", "step": 3})])
    assert result.metadata["tags"] == {"task_id": "iris", "step": 3}


@pytest.mark.parametrize(
    ("inputs", "error"),
    [({"data.csv": "/no/such/file"}, "does not exist"), ({"a/b": "/etc/hostname"}, "plain")],
)
def test_bad_inputs_are_refused_at_submit(sandbox, inputs, error) -> None:
    with pytest.raises(ValueError, match=error):
        sandbox.submit([Job("pass", inputs=inputs)])


def test_non_job_is_refused(sandbox) -> None:
    with pytest.raises(TypeError, match="Job"):
        sandbox.submit(["print('hi')"])


def test_unknown_isolation_is_refused() -> None:
    with pytest.raises(ValueError, match="isolation"):
        LocalSandbox(isolation="chroot")


def test_required_level_that_does_not_work_raises(monkeypatch) -> None:
    missing = isolation_module.Isolation("bwrap", "none", "private", True, "no-such-bwrap")
    monkeypatch.setattr(local_module, "LEVELS", (missing,))
    with pytest.raises(SandboxUnavailableError, match="no-such-bwrap is not installed"):
        LocalSandbox(isolation="bwrap")


def test_auto_fallback_warns_once(monkeypatch) -> None:
    monkeypatch.setattr(local_module, "LEVELS", isolation_module.LEVELS[1:])
    monkeypatch.setattr(local_module, "_WARNED", set())
    with pytest.warns(RuntimeWarning, match="install bubblewrap"):
        first = LocalSandbox(timeout_s=10, allow_weak_isolation=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = LocalSandbox(timeout_s=10, allow_weak_isolation=True)
    assert first.metadata["isolation"] == second.metadata["isolation"] == "unshare"
    first.close()
    second.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("level", "network", "filesystem"),
    [("unshare", "none", "host"), ("rlimits", "host", "host")],
)
def test_weaker_levels_say_what_they_do_not_isolate(level, network, filesystem) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = LocalSandbox(timeout_s=20, isolation=level, allow_weak_isolation=True)
    with sandbox, server:
        [result] = sandbox.run([Job(program)])
    assert result.metadata["isolation"] == level
    assert result.metadata["network"] == network
    assert result.metadata["filesystem"] == filesystem
    # the claim matches what happened: a host network lets the connection through
    assert result.ok is (network == "host"), result


@pytest.mark.parametrize("level", ["unshare", "rlimits"])
def test_weaker_levels_still_kill_the_whole_process_tree(level, marker) -> None:
    background = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[-1]],"
        " start_new_session=True)\n"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = LocalSandbox(timeout_s=2, isolation=level, allow_weak_isolation=True)
    with sandbox:
        left_behind, timed_out = sandbox.run(
            [Job(marked(background, marker)), Job(marked(background + "time.sleep(60)\n", marker))]
        )
    assert left_behind.ok, left_behind
    assert timed_out.status is ExecStatus.TIMEOUT
    assert_no_process_with(marker, grace_s=0.5)


def test_without_bubblewrap_untrusted_programs_are_refused(monkeypatch) -> None:
    monkeypatch.setattr(local_module, "LEVELS", isolation_module.LEVELS[1:])  # no bwrap here
    with pytest.raises(SandboxUnavailableError) as refusal:
        LocalSandbox(timeout_s=10)
    message = str(refusal.value)
    assert "refuses to run untrusted programs" in message
    assert "apt-get install bubblewrap" in message and "allow_weak_isolation=True" in message
    with pytest.raises(SandboxUnavailableError, match="refuses"):
        LocalSandbox(timeout_s=10, isolation="rlimits")  # naming a weak level is no opt-in


@pytest.mark.skipif(os.geteuid() != 0, reason="jobs run as root only when the sandbox does")
def test_as_root_without_an_own_uid_untrusted_programs_are_refused(monkeypatch) -> None:
    # the machine: the dedicated uid cannot execute a Python that lives under /root
    real_probe = local_module._probe

    def probe(level, interpreter, dedicated_uid):
        if dedicated_uid:
            return "exit status 126: permission denied: the interpreter"
        return real_probe(level, interpreter, dedicated_uid)

    monkeypatch.setattr(local_module, "_probe", probe)
    with pytest.raises(SandboxUnavailableError) as refusal:
        LocalSandbox(timeout_s=10)
    assert "run as a non-root user" in str(refusal.value)
    assert "permission denied" in str(refusal.value)


def test_the_opt_in_runs_trusted_programs_and_every_result_says_so(monkeypatch) -> None:
    monkeypatch.setattr(local_module, "LEVELS", isolation_module.LEVELS[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = LocalSandbox(timeout_s=20, allow_weak_isolation=True)
    with sandbox:
        [result] = sandbox.run([Job("print('trusted')")])
    assert result.ok and result.stdout == "trusted\n", result
    assert result.metadata["weak_isolation"] is True
    assert result.metadata["allow_weak_isolation"] is True
    assert result.metadata["filesystem"] == "host"


def test_the_full_sandbox_is_not_weak(sandbox) -> None:
    [result] = sandbox.run([Job("pass")])
    assert result.metadata["weak_isolation"] is False
    assert result.metadata["allow_weak_isolation"] is False


def test_the_task_suite_sandbox_opts_in_only_when_told(monkeypatch) -> None:
    from wmrl_env.envs.ml_tasks.sandbox import ALLOW_WEAK_VARIABLE, default_sandbox

    monkeypatch.setattr(local_module, "LEVELS", isolation_module.LEVELS[1:])
    monkeypatch.delenv(ALLOW_WEAK_VARIABLE, raising=False)
    with pytest.raises(SandboxUnavailableError, match="refuses"):
        default_sandbox(max_workers=1)
    monkeypatch.setenv(ALLOW_WEAK_VARIABLE, "1")  # what scripts/bench.sh sets
    with pytest.raises(SandboxUnavailableError, match="refuses"):
        default_sandbox(max_workers=1)  # arbitrary programs: the variable does not cover them
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = default_sandbox(max_workers=1, suite_programs=True)
    with sandbox:
        assert sandbox.metadata["weak_isolation"] is True
