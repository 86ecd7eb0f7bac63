"""The warm pool: same results as cold jobs, nothing shared between jobs, a dead server is
restarted and its job reported. (The hostile-program suite and the Executor contract also run
on it: ``local-warm`` in conftest, :class:`TestWarmSandboxContract` here.)"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
import warnings

import pytest
from sandbox_testing import (
    SandboxContract,
    assert_same_outputs,
    marked,
    suite_jobs,
    wait_for_process_with,
)

from wmrl_env.executors import ExecStatus
from wmrl_env.sandboxes import Job, LocalSandbox
from wmrl_env.sandboxes.processes import children


class TestWarmSandboxContract(SandboxContract):
    def make_executor(self) -> LocalSandbox:
        return LocalSandbox(timeout_s=30, memory_mb=512, warm=True, preload=("json",))


@pytest.fixture(scope="module")
def warm():
    with LocalSandbox(timeout_s=60, memory_mb=2048, warm=True, max_workers=2) as sandbox:
        yield sandbox


@pytest.mark.slow
def test_ml_task_scores_are_bit_identical_to_cold_jobs(warm, tmp_path) -> None:
    jobs = suite_jobs(tmp_path)
    with LocalSandbox(timeout_s=60, memory_mb=2048, max_workers=2) as cold:
        cold_results = cold.run(jobs)
    warm_results = warm.run(jobs)
    assert_same_outputs(cold_results, warm_results)


def test_a_job_sees_no_trace_of_the_job_before(tmp_path) -> None:
    leave = """
        import os, subprocess, sys
        import numpy, sklearn
        open("left.txt", "w").write("secret")
        os.environ["LEFT_BEHIND"] = "1"
        numpy.LEFT_BEHIND = 1
        sklearn.set_config(assume_finite=True)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                         start_new_session=True)
        print(numpy.random.rand())
    """
    look = """
        import json, os
        import numpy, sklearn
        json.dump({
            "files": sorted(os.listdir(".")),
            "jobs": os.listdir("/jobs") if os.path.isdir("/jobs") else [],
            "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
            "env": "LEFT_BEHIND" in os.environ,
            "module": hasattr(numpy, "LEFT_BEHIND"),
            "config": sklearn.get_config()["assume_finite"],
            "random": numpy.random.rand(),
        }, open("seen.json", "w"))
    """
    with LocalSandbox(timeout_s=30, memory_mb=1024, warm=True, max_workers=1) as sandbox:
        [left] = sandbox.run([Job(textwrap.dedent(leave))])
        [seen] = sandbox.run([Job(textwrap.dedent(look), output_files=("seen.json",))])
        assert sandbox.live_processes() == []
    assert left.ok and seen.ok, (left, seen)
    facts = json.loads(seen.outputs["seen.json"])
    assert facts["files"] == [".tmp", "inputs", "main.py"]
    assert facts["jobs"] == []
    assert facts["pids"] == [1, 2]  # its own PID 1 and itself: no process of another job
    assert not facts["env"] and not facts["module"] and not facts["config"]
    assert facts["random"] != float(left.stdout)  # numpy's global RNG is reseeded per job


def test_concurrent_jobs_cannot_see_each_other(marker) -> None:
    sleeper = marked("import time\nopen('mine.txt', 'w')\ntime.sleep(120)\n", marker)
    look = """
        import os
        found = []
        for root, dirs, files in os.walk("/"):
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr", "site-packages")]
            found += [f for f in files if f == "mine.txt"]
        print(found, sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
    """
    with LocalSandbox(timeout_s=60, memory_mb=512, warm=True, preload=(), max_workers=2) as sb:
        futures = sb.submit([Job(sleeper)])
        wait_for_process_with(marker)
        [seen] = sb.run([Job(textwrap.dedent(look))])
        sb.close()
        assert futures[0].result().status is ExecStatus.ERROR  # closed while it slept
    assert seen.ok, seen
    assert seen.stdout.split("]")[0] == "[", seen.stdout  # no file of the other job
    assert seen.stdout.strip().endswith("[1, 2]")


def test_capabilities_are_dropped_before_the_program_runs() -> None:
    program = "print(open('/proc/self/status').read())"
    with LocalSandbox(timeout_s=30, memory_mb=512, warm=True, preload=()) as sandbox:
        [result] = sandbox.run([Job(program)])
    status = dict(line.split(":\t", 1) for line in result.stdout.splitlines() if ":\t" in line)
    for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[field], 16) == 0, (field, status[field])
    assert status["NoNewPrivs"].strip() == "1"
    if os.geteuid() == 0:
        assert status["Uid"].split()[0] != "0"


def test_a_killed_server_loses_no_job_and_is_replaced(marker) -> None:
    with LocalSandbox(timeout_s=60, memory_mb=512, warm=True, preload=(), max_workers=1) as sb:
        [before] = sb.run([Job("print('first')")])
        [bwrap] = sb.warm_servers()
        [future] = sb.submit([Job(marked("import time\ntime.sleep(120)\n", marker))])
        wait_for_process_with(marker)
        for pid in children(bwrap):
            os.kill(pid, signal.SIGKILL)  # the server itself
        killed = future.result(timeout=30)
        [after] = sb.run([Job("print('next')")])
        assert sb.warm_servers() != [bwrap]
    assert before.ok and after.ok and after.stdout == "next\n", after
    assert killed.status is ExecStatus.ERROR
    assert "warm server died" in killed.message and "new server" in killed.message


def test_an_idle_server_that_died_is_restarted_before_the_next_job() -> None:
    with LocalSandbox(timeout_s=30, memory_mb=512, warm=True, preload=(), max_workers=1) as sb:
        [bwrap] = sb.warm_servers()
        os.kill(bwrap, signal.SIGKILL)
        time.sleep(0.2)
        [result] = sb.run([Job("print('ok')")])
    assert result.ok and result.stdout == "ok\n", result


def test_the_memory_limit_is_on_top_of_the_preloaded_libraries() -> None:
    hoard = "x = bytearray(300 * 2**20)\nprint(len(x))\n"
    with LocalSandbox(timeout_s=30, memory_mb=256, warm=True, preload=("numpy",)) as sb:
        fits, too_big = sb.run([Job("x = bytearray(100 * 2**20)"), Job(hoard)])
    assert fits.ok, fits
    assert too_big.status is ExecStatus.OUT_OF_MEMORY and "256 MB" in too_big.message


def test_warm_without_bwrap_runs_cold_and_says_so() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with LocalSandbox(
            timeout_s=30, isolation="rlimits", warm=True, allow_weak_isolation=True
        ) as sandbox:
            [result] = sandbox.run([Job("pass")])
    assert result.ok and result.metadata["warm"] is False
    assert any("warm pool needs bwrap" in str(w.message) for w in caught)


def test_a_job_without_a_uid_of_its_own_runs_as_its_server(monkeypatch) -> None:
    """As root, where jobs cannot get a dedicated uid (weak isolation, opted in), a warm job
    keeps its server's uid: root of the server's user namespace, an unprivileged uid outside,
    which owns the job's directory; without root, the caller's uid, as before."""
    from wmrl_env.sandboxes import local
    from wmrl_env.sandboxes.isolation import LEVELS

    monkeypatch.setattr(local, "_choose_isolation", lambda *args: (LEVELS[0], False))
    program = "import os\nopen('uid.txt', 'w').write(str(os.getuid()))\n"
    with LocalSandbox(timeout_s=30, warm=True, preload=(), allow_weak_isolation=True) as sb:
        [result] = sb.run([Job(program, output_files=("uid.txt",))])
    assert result.ok, result
    assert result.outputs["uid.txt"] == str(0 if os.geteuid() == 0 else os.getuid()).encode()
