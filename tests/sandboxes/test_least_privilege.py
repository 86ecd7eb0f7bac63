"""Least privilege in the local sandbox: what a job (and the warm server's preload) may do.

- The warm server holds only the hand-over's capabilities, from before its first import, in
  a user namespace of its own (also when started by root), and sees no host process.
- A job cannot make namespaces, open an io_uring or use the other calls of the seccomp
  denylist, cold or warm, local or in a warm Docker container (marker ``docker``).
- ``/dev`` holds nothing writable but device nodes and the job's own, fresh ``/dev/shm``;
  nothing one job writes there is seen by the next.
- Killing never names a pid that may have been recycled.

These run as whoever runs pytest; ``scripts/test-nonroot.sh`` (called by ``scripts/test.sh``)
runs them again as an unprivileged user, where jobs keep the caller's uid.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sandbox_testing import assert_denylist_applied, syscall_probe

from wmrl_env.sandboxes import Job, LocalSandbox
from wmrl_env.sandboxes.isolation import SERVER_CAPABILITIES, Interpreter
from wmrl_env.sandboxes.processes import children, kill_until_gone
from wmrl_env.sandboxes.seccomp import DENIED, SYSCALLS, denylist_program, server_program
from wmrl_env.sandboxes.warm import WarmServer

# linux/capability.h
CAPABILITY_BITS = {"CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_SYS_ADMIN": 21}

SPY = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
report = {"status": {}, "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
for line in open("/proc/self/status"):
    name, _, value = line.partition(":")
    if name.startswith("Cap"):
        report["status"][name] = int(value, 16)
try:
    report["pid1"] = open("/proc/1/cmdline", "rb").read().decode(errors="replace")
except OSError as error:
    report["pid1"] = repr(error)
report["userns"] = os.readlink("/proc/self/ns/user")
# swapon checks CAP_SYS_ADMIN in the initial user namespace before it looks at its path
swapon = libc.syscall(SWAPON, b"/nonexistent-wmrl-swap", 0)
report["swapon"] = "ok" if swapon == 0 else errno.errorcode[ctypes.get_errno()]
json.dump(report, open("/jobs/out/spy.json", "w"))
"""


def _spy_on_the_preload(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """Start a warm server whose preload is a spy (a compromised wheel); the server's ready
    message, what the spy saw at import time, and what the host sees of the server process
    (its user namespace, its uids) while it runs."""
    swapon = SYSCALLS["swapon"][os.uname().machine]
    (tmp_path / "wmrl_spy.py").write_text(SPY.replace("SWAPON", str(swapon)))
    (tmp_path / "out").mkdir()
    (tmp_path / "out").chmod(0o777)  # the server may run as a uid that owns nothing here
    tmp_path.chmod(0o755)
    interpreter = Interpreter.inspect(sys.executable)
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/jobs", "LANG": "C.UTF-8"}
    server = WarmServer(interpreter, tmp_path, environment, ("wmrl_spy",))
    try:
        ready = server.ready()
        # bwrap, its PID 1 of the server's namespace, the server (the one running Python)
        tree = [server.process.pid]
        for _ in range(2):
            tree += [child for pid in tree for child in children(pid) if child not in tree]
        [pid] = [p for p in tree if _argv0(p) == interpreter.executable]
        host_view = {
            "userns": os.readlink(f"/proc/{pid}/ns/user"),
            "uid": _status_line(pid, "Uid"),
            "gid": _status_line(pid, "Gid"),
        }
    finally:
        server.stop()
    report = json.loads((tmp_path / "out" / "spy.json").read_text())
    return ready, report, host_view


def _argv0(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()


def _status_line(pid: int, field: str) -> str:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return next(line.split(":", 1)[1].strip() for line in lines if line.startswith(field + ":"))


def test_the_warm_preload_holds_only_the_hand_over_capabilities(tmp_path) -> None:
    """A module the server imports (a compromised wheel) sees at import time: capabilities
    within the four the hand-over needs, and its own PID namespace, not the host's."""
    ready, report, _ = _spy_on_the_preload(tmp_path)
    assert ready["imported"] == ["wmrl_spy"], ready
    allowed = sum(1 << CAPABILITY_BITS[name] for name in SERVER_CAPABILITIES)
    assert set(SERVER_CAPABILITIES) <= set(CAPABILITY_BITS)
    for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        held = report["status"][field]
        assert held & ~allowed == 0, f"{field} = {held:#x} holds more than {allowed:#x}"
    host_init = Path("/proc/1/cmdline").read_bytes().decode(errors="replace")
    assert report["pid1"] != host_init, report["pid1"]
    assert "bwrap" in report["pid1"]  # PID 1 of its namespace is bubblewrap's
    assert len(report["pids"]) <= 3, report["pids"]  # bwrap, the server: no host process


def test_the_warm_server_holds_no_capability_outside_its_own_user_namespace(tmp_path) -> None:
    """Started by root or not, the server imports its preload in a user namespace that is not
    the host's, as a uid that is not root outside it: its capabilities count there only
    (``swapon``, which asks for CAP_SYS_ADMIN in the initial namespace, is refused)."""
    ready, report, host_view = _spy_on_the_preload(tmp_path)
    assert ready["imported"] == ["wmrl_spy"], ready
    assert host_view["userns"] == report["userns"]
    assert host_view["userns"] != os.readlink("/proc/self/ns/user"), host_view
    # real, effective, saved and file-system ids, as the host sees them: none is root
    assert "0" not in host_view["uid"].split() + host_view["gid"].split(), host_view
    assert report["swapon"] == "EPERM", report
    assert report["status"]["CapEff"] != 0  # it still holds the hand-over's, in its namespace


def _docker_warm(**limits: Any) -> Any:
    from wmrl_env.sandboxes import DockerSandbox

    return DockerSandbox(warm=True, max_workers=1, **limits)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(functools.partial(LocalSandbox, warm=False), id="cold"),
        pytest.param(functools.partial(LocalSandbox, warm=True), id="warm"),
        pytest.param(_docker_warm, id="docker-warm", marks=pytest.mark.docker),
    ],
)
def test_the_seccomp_denylist_refuses_namespaces_and_io_uring(make) -> None:
    """Every call of the denylist answers EPERM (ENOSYS for ``clone3``), with the same probes
    in every sandbox that installs it; threads, fork and subprocesses still work."""
    with make(timeout_s=30, memory_mb=512, preload=()) as sandbox:
        [result] = sandbox.run([syscall_probe()])
    assert result.ok, result
    assert_denylist_applied(result)
    assert result.metadata["seccomp"] == "denylist"


DEV_LOOK = r"""
import json, os, stat
found = {"writable": [], "shm": sorted(os.listdir("/dev/shm"))}
for root, dirs, files in os.walk("/dev"):
    for name in dirs + files:
        path = os.path.join(root, name)
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode) or stat.S_ISCHR(mode):
            continue  # links into /proc/self; device nodes (null, zero, tty, ...)
        if stat.S_ISDIR(mode):  # writable: a file can be made in it
            try:
                os.close(os.open(os.path.join(path, ".probe"), os.O_CREAT | os.O_WRONLY))
                os.unlink(os.path.join(path, ".probe"))
                found["writable"].append(path)
            except OSError:
                pass
        elif os.access(path, os.W_OK):
            found["writable"].append(path)
try:
    open("/dev/planted", "w").write("x")
    found["planted"] = True
except OSError:
    found["planted"] = False
statvfs = os.statvfs("/dev/shm")
found["shm_bytes"] = statvfs.f_blocks * statvfs.f_frsize
with open("/dev/shm/left-by-" + os.environ["WHO"], "w") as left:
    left.write("a message to the next job")
json.dump(found, open("dev.json", "w"))
"""


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_dev_holds_nothing_writable_but_the_jobs_own_fresh_shm(warm) -> None:
    def job(who: str) -> Job:
        return Job(
            f"import os\nos.environ['WHO'] = {who!r}\n" + DEV_LOOK, output_files=("dev.json",)
        )

    with LocalSandbox(timeout_s=30, memory_mb=512, warm=warm, preload=(), max_workers=1) as sb:
        first, second = sb.run([job("first"), job("second")])
    assert first.ok and second.ok, (first, second)
    for result in (first, second):
        found = json.loads(result.outputs["dev.json"])
        assert found["writable"] == ["/dev/shm"], found
        assert found["planted"] is False
        assert 0 < found["shm_bytes"] <= 64 << 20, found
    assert json.loads(second.outputs["dev.json"])["shm"] == []  # nothing of the first job


def test_kill_until_gone_spares_a_pid_that_no_longer_matches() -> None:
    """A pid found once but not confirmed (its process ended, the number was recycled) is
    not killed."""
    bystander = subprocess.Popen(["sleep", "60"])
    answers = [[bystander.pid], []]  # found, then gone from the job's processes
    try:
        kill_until_gone(lambda: answers.pop(0) if answers else [])
        assert bystander.poll() is None, "a process that was not the job's was killed"
    finally:
        bystander.kill()
        bystander.wait()


def test_the_syscall_table_matches_the_kernel_headers() -> None:
    headers = {
        "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        "aarch64": Path("/usr/include/asm-generic/unistd.h"),
    }
    present = {arch: path for arch, path in headers.items() if path.exists()}
    if not present:
        pytest.skip("no kernel headers (linux-libc-dev) to check the syscall table against")
    for arch, path in present.items():
        defined = {
            name: int(number)
            for name, number in re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", path.read_text())
        }
        for name, table in SYSCALLS.items():
            if arch in table and name in defined:
                assert table[arch] == defined[name], (arch, name, table[arch], defined[name])
        assert {n for n, t in SYSCALLS.items() if arch in t} <= defined.keys() | {"_sysctl"}


def test_the_filter_is_well_formed_for_both_architectures() -> None:
    for machine in ("x86_64", "aarch64"):
        program = denylist_program(machine)
        assert len(program) % 8 == 0 and len(program) // 8 <= 4096
    assert {"unshare", "setns", "io_uring_setup", "keyctl", "bpf", "ptrace"} <= DENIED
    with pytest.raises(ValueError, match="riscv64"):
        denylist_program("riscv64")


def _run_filter(program: bytes, arch: int, number: int, arg0: int = 0) -> int:
    """What a classic-BPF seccomp ``program`` answers for one call (the instructions the
    filters use: load a word of ``seccomp_data``, jump if equal / greater or equal / any bit
    set, return)."""
    data = struct.pack("<iIQ6Q", number, arch, 0, arg0, 0, 0, 0, 0, 0)
    instructions = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        code, jump_true, jump_false, k = instructions[pc]
        pc += 1
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: accumulator & k}[code]
            pc += jump_true if taken else jump_false


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_docker_warm_servers_filter_refuses_user_namespaces_only(machine) -> None:
    """The filter a warm Docker container's first process installs under its server: no user
    namespace, no performance counters, no other ABI, clone3 unknown; the namespaces each
    job needs, mounts and ordinary calls allowed."""
    table = {name: numbers[machine] for name, numbers in SYSCALLS.items() if machine in numbers}
    program = server_program(machine)
    arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[machine]
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    new_user, job_namespaces = 0x10000000, 0x00020000 | 0x20000000 | 0x08000000
    answers = {
        ("unshare", new_user): eperm,
        ("unshare", new_user | job_namespaces): eperm,
        ("unshare", job_namespaces): allow,
        ("clone", new_user | 17): eperm,
        ("clone", 17): allow,
        ("clone3", 0): enosys,
        ("perf_event_open", 0): eperm,
        ("mount", 0): allow,
        ("setns", 0): allow,
    }
    for (name, arg0), expected in answers.items():
        assert _run_filter(program, arch, table[name], arg0) == expected, (name, hex(arg0))
    assert _run_filter(program, 0x40000003, 5) == eperm  # i386
    if machine == "x86_64":
        assert _run_filter(program, arch, 0x40000000 | 1) == eperm  # x32
    # the jobs' denylist, read the same way, refuses what the server may do
    for name in ("unshare", "mount", "setns"):
        assert _run_filter(denylist_program(machine), arch, table[name], 0) == eperm


def test_the_non_root_pass_is_not_root() -> None:
    """scripts/test-nonroot.sh sets WMRL_NONROOT_PASS: then the tests above ran without root."""
    if not os.environ.get("WMRL_NONROOT_PASS"):
        pytest.skip("only meaningful in the non-root pass (scripts/test-nonroot.sh)")
    assert os.geteuid() != 0 and os.getuid() != 0


def test_child_pidfds_hold_the_children_and_kill_them() -> None:
    """The warm server's bwrap is stopped through pidfds of its children, taken while it is
    their unreaped parent; here a fresh interpreter is the parent (the test process may hold
    other children: workers of earlier tests)."""
    script = """
import subprocess, os
from wmrl_env.sandboxes.processes import child_pidfds, kill_pidfds
child = subprocess.Popen(["sleep", "60"])
try:
    held = child_pidfds(os.getpid())
    kill_pidfds(held)
    print(len(held), child.wait(timeout=5))
finally:
    child.kill()
    child.wait()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "-9"]
