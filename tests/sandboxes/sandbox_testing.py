"""Helpers for the sandbox tests: jobs, the shared contract with sandbox jobs, and finding
the processes a job left behind (by a marker in their command line).

A module of its own (not ``conftest``): test modules import it by this unique name.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from typing import Any

from wmrl_env.sandboxes import Job, JsonScore
from wmrl_env.sandboxes.seccomp import DENIED, SYSCALLS
from wmrl_env.testing import ExecutorContract

SCORE = JsonScore("score.json")


def score_job(value: float, **kwargs: Any) -> Job:
    """A job that writes ``{"score": value}`` to score.json, scored by :data:`SCORE`."""
    program = f"import json\njson.dump({{'score': {value}}}, open('score.json', 'w'))\n"
    return Job(program, output_files=SCORE.files, scorer=SCORE, **kwargs)


class SandboxContract(ExecutorContract):
    """The shared Executor contract with sandbox jobs; subclasses give ``make_executor``."""

    def make_ok_job(self, i: int) -> Job:
        return score_job(i)

    def expected_score(self, i: int) -> float:
        return float(i)

    def make_failing_job(self) -> Job:
        return Job("raise SystemExit(3)")


# what the seccomp denylist refuses, called one by one (NUMBERS: the denylist's table for this
# machine), then what ordinary programs do; what each answered goes to seen.json
_SYSCALL_PROBE = r"""
import ctypes, errno, json, os, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def call(*args):
    result = libc.syscall(*args)
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

seen = {
    "unshare(CLONE_NEWUSER)": "ok" if libc.unshare(0x10000000) == 0
                              else errno.errorcode[ctypes.get_errno()],
    "io_uring_setup": call(NUMBERS["io_uring_setup"], 4, ctypes.create_string_buffer(120)),
    "keyctl": call(NUMBERS["keyctl"], 0, -3, 0),
    "bpf": call(NUMBERS["bpf"], 0, 0, 0),
    "perf_event_open": call(NUMBERS["perf_event_open"], 0, 0, -1, -1, 0),
    "personality(READ_IMPLIES_EXEC)": call(NUMBERS["personality"], 0x0400000),
}
child = libc.syscall(NUMBERS["clone"], 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
if child == 0:  # the filter let it through: the copy leaves at once
    os._exit(0)
if child > 0:
    os.waitpid(child, 0)
seen["clone(CLONE_NEWUSER)"] = "ok" if child > 0 else errno.errorcode[ctypes.get_errno()]
thread = threading.Thread(target=lambda: None)
thread.start()
thread.join()
seen["thread"] = "ok"
out = subprocess.run([sys.executable, "-c", "print('child')"], capture_output=True, text=True)
seen["subprocess"] = out.stdout.strip()
pid = os.fork()
if pid == 0:
    os._exit(0)
seen["fork"] = "ok" if os.waitpid(pid, 0)[0] == pid else "?"
seen["denied"] = {}
for name in DENIED:  # nonsense arguments: without the filter each fails harmlessly
    result = libc.syscall(NUMBERS[name], *[ctypes.c_long(-1)] * 6)
    seen["denied"][name] = "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
json.dump(seen, open("seen.json", "w"))
"""


def syscall_probe() -> Job:
    """A job that makes the seccomp denylist's calls and ordinary ones; what each call
    answered is its output ``seen.json`` (see :func:`assert_denylist_applied`)."""
    machine = os.uname().machine
    numbers = {name: table[machine] for name, table in SYSCALLS.items() if machine in table}
    denied = sorted(DENIED & numbers.keys())
    program = f"NUMBERS = {numbers!r}\nDENIED = {denied!r}\n" + _SYSCALL_PROBE
    return Job(program, output_files=("seen.json",))


def assert_denylist_applied(result: Any) -> None:
    """The :func:`syscall_probe` job saw EPERM for every call of the denylist, and threads,
    subprocesses and fork worked."""
    seen = json.loads(result.outputs["seen.json"])
    for call in (
        "unshare(CLONE_NEWUSER)",
        "io_uring_setup",
        "keyctl",
        "bpf",
        "perf_event_open",
        "clone(CLONE_NEWUSER)",
        "personality(READ_IMPLIES_EXEC)",
    ):
        assert seen[call] == "EPERM", (call, seen)
    allowed = {name: answer for name, answer in seen["denied"].items() if answer != "EPERM"}
    assert allowed == {}, f"calls of the denylist that were not refused: {allowed}"
    assert len(seen["denied"]) >= 50, seen["denied"]
    # what ordinary programs do still works
    assert seen["thread"] == "ok" and seen["subprocess"] == "child", seen
    assert seen["fork"] == "ok", seen


def suite_jobs(data_root: Any) -> list[Job]:
    """Three of the ML suite's programs on two tasks (wine, diabetes), as jobs whose data is
    exported under ``data_root``: for comparing backends' outputs byte for byte."""
    from wmrl_env.envs.ml_tasks.programs import ProgramSpec, render_program
    from wmrl_env.envs.ml_tasks.registry import get_task

    jobs = []
    for task_id in ("wine", "diabetes"):
        task = get_task(task_id)
        for program_id in ("standardize-linear-mid", "none-forest-low", "log1p-boosting-high"):
            program = render_program(ProgramSpec.from_id(program_id), task.kind)
            jobs.append(task.make_job(program, data_root=data_root, normalise=False))
    return jobs


def assert_same_outputs(cold_results: list[Any], warm_results: list[Any]) -> None:
    """Cold and warm runs of the same jobs all succeeded with byte-identical outputs."""
    for cold_result, warm_result in zip(cold_results, warm_results, strict=True):
        assert cold_result.ok and warm_result.ok, (cold_result, warm_result)
        assert warm_result.outputs == cold_result.outputs  # the predictions, byte for byte
        assert warm_result.score == cold_result.score
        assert warm_result.metadata["warm"] and not cold_result.metadata["warm"]


def processes_with(marker: str) -> list[int]:
    """Pids of processes (in any container or namespace) whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                if marker.encode() in cmdline.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def assert_no_process_with(marker: str, grace_s: float = 2.0) -> None:
    """Fail unless every process carrying ``marker`` is gone within ``grace_s``."""
    deadline = time.monotonic() + grace_s
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    leaked = processes_with(marker)
    assert not leaked, f"processes left running: {leaked}"


def wait_for_process_with(marker: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not processes_with(marker):
        assert time.monotonic() < deadline, f"no process with {marker} started"
        time.sleep(0.05)


def marked(program: str, marker: str) -> str:
    """``program``, re-executed with ``marker`` in its argv so every process it forks has it."""
    prefix = f"""
        import os, sys
        if {marker!r} not in sys.argv:
            os.execv(sys.executable, [sys.executable, "main.py", {marker!r}])
    """
    return textwrap.dedent(prefix) + textwrap.dedent(program)
