"""Hostile and broken programs: every sandbox backend must contain each one.

Each test runs on every backend (``sandbox_factory``). Every program re-executes itself with a
unique marker in its command line, so every process it starts can be found on the host
(also inside containers) and the test can check that none is left afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest
from sandbox_testing import assert_no_process_with, marked, wait_for_process_with

from wmrl_env.executors import ExecStatus
from wmrl_env.sandboxes import Job, JsonScore


def test_infinite_loop_times_out(sandbox_factory, marker) -> None:
    sandbox = sandbox_factory(timeout_s=2)
    [result] = sandbox.run([Job(marked("while True:\n    pass\n", marker))])
    assert result.status is ExecStatus.TIMEOUT, result
    assert "2 s" in result.message
    assert 2 <= result.wall_seconds < 10


def test_memory_bomb_is_out_of_memory(sandbox_factory, marker) -> None:
    program = "hoard = []\nwhile True:\n    hoard.append(bytearray(10**7))\n"
    sandbox = sandbox_factory(timeout_s=30, memory_mb=256)
    [result] = sandbox.run([Job(marked(program, marker))])
    assert result.status is ExecStatus.OUT_OF_MEMORY, result
    assert "256 MB" in result.message


def test_fork_bomb_is_contained_by_the_process_limit(sandbox_factory, marker) -> None:
    sandbox = sandbox_factory(timeout_s=10, max_processes=32)
    [harmless] = sandbox.run([Job("pass")])  # what this backend really applies
    assert "not enforced" not in harmless.metadata["process_limit"], (
        "refusing to run a fork bomb without an enforced process limit"
    )
    # linear, not exponential: if the limit ever failed, the damage stays bounded (1000)
    program = """
        import os, sys, time
        forked = 0
        try:
            for _ in range(1000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                forked += 1
        finally:
            print(forked, flush=True)
    """
    [result] = sandbox.run([Job(marked(program, marker))])
    assert result.status is ExecStatus.CRASHED, result
    assert "Resource temporarily unavailable" in result.message
    assert 0 < int(result.stdout.split()[-1]) < 32
    assert subprocess.run(["true"], check=False).returncode == 0  # the host still forks


def test_writes_outside_the_work_dir_are_refused(sandbox_factory, marker, tmp_path) -> None:
    targets = [str(tmp_path / "escape.txt"), "../escape.txt", f"/etc/{marker}", f"/usr/{marker}"]
    program = f"""
        import json
        refused = []
        for path in {targets!r}:
            try:
                with open(path, "w") as file:
                    file.write("escaped")
            except OSError as error:
                refused.append(path)
        json.dump(refused, open("refused.json", "w"))
    """
    sandbox = sandbox_factory(timeout_s=20)
    [result] = sandbox.run([Job(marked(program, marker), output_files=("refused.json",))])
    assert result.ok, result
    assert json.loads(result.outputs["refused.json"]) == targets
    for host_path in (tmp_path / "escape.txt", f"/etc/{marker}", f"/usr/{marker}"):
        assert not os.path.exists(host_path), host_path


def test_hidden_answers_are_out_of_reach(sandbox_factory, marker, tmp_path) -> None:
    secret = uuid.uuid4().hex
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"label": secret}))
    program = f"""
        import os
        try:
            print(open({str(answers)!r}).read())
        except OSError as error:
            print("refused:", type(error).__name__)
        print(sorted(os.listdir("inputs")))
    """

    def scorer(outputs):  # runs on the host, where the answers are
        return float(json.loads(answers.read_text())["label"] == secret)

    sandbox = sandbox_factory(timeout_s=20)
    [result] = sandbox.run([Job(marked(program, marker), scorer=scorer)])
    assert result.ok and result.score == 1.0, result
    assert secret not in result.stdout
    assert "refused:" in result.stdout


def test_network_connection_is_refused(sandbox_factory, marker) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    program = f"""
        import socket
        socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"stolen")
        print("connected")
    """
    try:
        sandbox = sandbox_factory(timeout_s=20)
        [result] = sandbox.run([Job(marked(program, marker))])
    finally:
        stop.set()
        thread.join()
        server.close()
    assert result.status is ExecStatus.CRASHED, result
    assert "connected" not in result.stdout
    assert accepted == []


def test_background_process_is_killed(sandbox_factory, marker) -> None:
    program = """
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", sys.argv[-1]],
                         start_new_session=True)
        print("left a child behind")
    """
    sandbox = sandbox_factory(timeout_s=20)
    [result] = sandbox.run([Job(marked(program, marker))])
    assert result.ok, result
    assert result.wall_seconds < 15  # did not wait for the child's pipes
    assert_no_process_with(marker, grace_s=0.5)


def test_huge_output_is_capped(sandbox_factory, marker) -> None:
    sandbox = sandbox_factory(timeout_s=60, max_output_bytes=4096)
    program = "import sys\nsys.stdout.write('x' * 10**8)\nprint('end')\n"
    [result] = sandbox.run([Job(marked(program, marker))])
    assert result.ok, result
    assert len(result.stdout) == 4096 and result.stdout.endswith("xend\n")
    assert result.metadata["stdout_truncated"] is True
    assert result.metadata["stdout_bytes"] == 10**8 + 4


def test_nonzero_exit_is_crashed(sandbox_factory, marker) -> None:
    sandbox = sandbox_factory(timeout_s=20)
    [result] = sandbox.run([Job(marked("raise SystemExit(3)\n", marker))])
    assert result.status is ExecStatus.CRASHED
    assert result.message == "exit status 3"


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("print('score: 0.9')", "score.json was not written"),
        ("open('score.json', 'w').write('{score: 0.9')", "score.json is not valid JSON"),
        ("open('score.json', 'w').write('[0.9]')", "must hold a JSON object"),
    ],
    ids=["no-score", "malformed", "not-an-object"],
)
def test_missing_or_malformed_score_is_invalid_output(
    sandbox_factory, marker, program, reason
) -> None:
    score = JsonScore("score.json")
    sandbox = sandbox_factory(timeout_s=20)
    [result] = sandbox.run([Job(marked(program, marker), output_files=score.files, scorer=score)])
    assert result.status is ExecStatus.INVALID_OUTPUT, result
    assert reason in result.message


def test_inputs_are_readable_but_read_only(sandbox_factory, marker, tmp_path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("x,y\n1,2\n")
    program = """
        import os
        print(open("inputs/data.csv").read().splitlines()[1])
        print(open(os.path.join(os.environ["WMRL_INPUTS"], "data.csv")).read().count("\\n"))
        try:
            open("inputs/data.csv", "a").write("tampered")
        except OSError:
            print("read-only")
    """
    sandbox = sandbox_factory(timeout_s=20)
    [result] = sandbox.run([Job(marked(program, marker), inputs={"data.csv": data})])
    assert result.ok, result
    assert result.stdout.split() == ["1,2", "2", "read-only"]
    assert data.read_text() == "x,y\n1,2\n"


def test_interrupted_batch_leaves_nothing_running(sandbox_factory, marker) -> None:
    sandbox = sandbox_factory(timeout_s=120)
    program = "import time\ntime.sleep(300)\n"
    futures = sandbox.submit([Job(marked(program, marker)) for _ in range(2)])
    wait_for_process_with(marker)
    start = time.monotonic()
    sandbox.close()
    results = [future.result(timeout=60) for future in futures]
    assert time.monotonic() - start < 30
    assert [r.status for r in results] == [ExecStatus.ERROR, ExecStatus.ERROR]
    assert all("closed" in r.message for r in results)


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt even where the run inherited SIGINT ignored (a job that
    a non-interactive shell started in the background: Python then installs no handler)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_during_run_closes_the_sandbox(sandbox_factory, marker, ctrl_c_raises) -> None:
    sandbox = sandbox_factory(timeout_s=120)
    program = "import time\ntime.sleep(300)\n"

    def press_ctrl_c() -> None:
        wait_for_process_with(marker)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        sandbox.run([Job(marked(program, marker))])
    assert sandbox.closed
