"""A seccomp denylist for local jobs, as a classic-BPF program (pure Python, no libseccomp).

Docker's default profile is the reference: a job may not make namespaces (``unshare``,
``setns``, ``clone`` with a namespace flag), mount anything, load kernel modules or a new
kernel, trace other processes, open io_uring rings, use the kernel keyring, ``bpf``,
``perf_event_open`` or ``userfaultfd``, open files by handle, or set an exotic
``personality``. Each such call fails with ``EPERM`` (the program sees an ordinary error);
``clone3`` fails with ``ENOSYS``, since its flags cannot be inspected, so that the C library
falls back to ``clone``, whose flags are checked. Calls from another ABI than the native one
(32-bit ``int 0x80``, x32) fail with ``EPERM`` too.

The cold path hands :func:`denylist_program` to bubblewrap (``--seccomp FD``); the warm
server, local or in a warm Docker container, installs the same bytes in each job's program
(``prctl(PR_SET_SECCOMP)``, after ``PR_SET_NO_NEW_PRIVS``), after the hand-over has made the
job's namespaces. A warm Docker container's first process installs the narrower
:func:`server_program` for its server, which must still make namespaces for each job.

Example:
    >>> program = denylist_program("x86_64")
    >>> len(program) % 8, len(program) // 8 < 256
    (0, True)
    >>> {"unshare", "setns", "io_uring_setup", "keyctl", "bpf"} <= DENIED
    True
"""

from __future__ import annotations

import errno
import functools
import platform
import struct

__all__ = ["DENIED", "SYSCALLS", "denylist_program", "job_denylist", "server_program"]

# BPF instruction classes and fields (linux/bpf_common.h)
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x05 | 0x40 | 0x00  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_RET_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0_LOW = 0, 4, 16  # args[0]'s low half (both architectures are little-endian)

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
# | CLONE_NEWNET (CLONE_NEWTIME only exists for clone3 and unshare, both denied outright)
_CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
_CLONE_NAMESPACE_FLAGS |= 0x20000000 | 0x40000000
_CLONE_NEWUSER = 0x10000000
# personality(2) values Docker allows: PER_LINUX, PER_LINUX32, UNAME26 variants, and the query
_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

# syscall numbers (x86_64: asm/unistd_64.h; aarch64: asm-generic/unistd.h)
SYSCALLS: dict[str, dict[str, int]] = {
    "acct": {"x86_64": 163, "aarch64": 89},
    "add_key": {"x86_64": 248, "aarch64": 217},
    "bpf": {"x86_64": 321, "aarch64": 280},
    "chroot": {"x86_64": 161, "aarch64": 51},
    "clock_adjtime": {"x86_64": 305, "aarch64": 266},
    "clock_settime": {"x86_64": 227, "aarch64": 112},
    "clone": {"x86_64": 56, "aarch64": 220},
    "clone3": {"x86_64": 435, "aarch64": 435},
    "delete_module": {"x86_64": 176, "aarch64": 106},
    "fanotify_init": {"x86_64": 300, "aarch64": 262},
    "finit_module": {"x86_64": 313, "aarch64": 273},
    "fsconfig": {"x86_64": 431, "aarch64": 431},
    "fsmount": {"x86_64": 432, "aarch64": 432},
    "fsopen": {"x86_64": 430, "aarch64": 430},
    "fspick": {"x86_64": 433, "aarch64": 433},
    "init_module": {"x86_64": 175, "aarch64": 105},
    "io_uring_enter": {"x86_64": 426, "aarch64": 426},
    "io_uring_register": {"x86_64": 427, "aarch64": 427},
    "io_uring_setup": {"x86_64": 425, "aarch64": 425},
    "kcmp": {"x86_64": 312, "aarch64": 272},
    "kexec_file_load": {"x86_64": 320, "aarch64": 294},
    "kexec_load": {"x86_64": 246, "aarch64": 104},
    "keyctl": {"x86_64": 250, "aarch64": 219},
    "lookup_dcookie": {"x86_64": 212, "aarch64": 18},
    "mount": {"x86_64": 165, "aarch64": 40},
    "mount_setattr": {"x86_64": 442, "aarch64": 442},
    "move_mount": {"x86_64": 429, "aarch64": 429},
    "name_to_handle_at": {"x86_64": 303, "aarch64": 264},
    "open_by_handle_at": {"x86_64": 304, "aarch64": 265},
    "open_tree": {"x86_64": 428, "aarch64": 428},
    "perf_event_open": {"x86_64": 298, "aarch64": 241},
    "personality": {"x86_64": 135, "aarch64": 92},
    "pidfd_getfd": {"x86_64": 438, "aarch64": 438},
    "pivot_root": {"x86_64": 155, "aarch64": 41},
    "process_vm_readv": {"x86_64": 310, "aarch64": 270},
    "process_vm_writev": {"x86_64": 311, "aarch64": 271},
    "ptrace": {"x86_64": 101, "aarch64": 117},
    "quotactl": {"x86_64": 179, "aarch64": 60},
    "reboot": {"x86_64": 169, "aarch64": 142},
    "request_key": {"x86_64": 249, "aarch64": 218},
    "setdomainname": {"x86_64": 171, "aarch64": 162},
    "sethostname": {"x86_64": 170, "aarch64": 161},
    "setns": {"x86_64": 308, "aarch64": 268},
    "settimeofday": {"x86_64": 164, "aarch64": 170},
    "swapoff": {"x86_64": 168, "aarch64": 225},
    "swapon": {"x86_64": 167, "aarch64": 224},
    "syslog": {"x86_64": 103, "aarch64": 116},
    "umount2": {"x86_64": 166, "aarch64": 39},
    "unshare": {"x86_64": 272, "aarch64": 97},
    "userfaultfd": {"x86_64": 323, "aarch64": 282},
    "vhangup": {"x86_64": 153, "aarch64": 58},
    # x86_64 only
    "create_module": {"x86_64": 174},
    "get_kernel_syms": {"x86_64": 177},
    "iopl": {"x86_64": 172},
    "ioperm": {"x86_64": 173},
    "nfsservctl": {"x86_64": 180},
    "query_module": {"x86_64": 178},
    "uselib": {"x86_64": 134},
    "ustat": {"x86_64": 136},
    "sysfs": {"x86_64": 139},
    "_sysctl": {"x86_64": 156},
}
# checked on their arguments, not denied outright
_CONDITIONAL = ("clone", "clone3", "personality")
DENIED = frozenset(SYSCALLS) - frozenset(_CONDITIONAL)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _ret_errno(error: int) -> bytes:
    return _op(_RET_K, _RET_ERRNO | error)


def _check_machine(machine: str | None) -> str:
    machine = machine or platform.machine()
    if machine not in _AUDIT_ARCH:
        raise ValueError(f"no seccomp syscall table for {machine!r} (x86_64, aarch64)")
    return machine


def _native_abi_only(machine: str) -> list[bytes]:
    """The filter's start: EPERM for a call of another ABI; the syscall number loaded."""
    eperm = _ret_errno(errno.EPERM)
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, _AUDIT_ARCH[machine], jt=1),
        eperm,  # another ABI
        _op(_LD_W_ABS, _NR),
    ]
    if machine == "x86_64":
        program += [_op(_JGE_K, _X32_SYSCALL_BIT, jf=1), eperm]
    return program


def _refuse_clone_flags(number: int, flags: int) -> list[bytes]:
    """EPERM for syscall ``number`` (``clone``, ``unshare``) when its first argument holds
    one of ``flags``; the syscall number loaded again after."""
    return [
        _op(_JEQ_K, number, jf=4),
        _op(_LD_W_ABS, _ARG0_LOW),
        _op(_JSET_K, flags, jf=1),
        _ret_errno(errno.EPERM),
        _op(_LD_W_ABS, _NR),
    ]


def server_program(machine: str | None = None) -> bytes:
    """The filter a warm Docker container's first process installs for the warm server (and
    so under every job's own :func:`denylist_program`): EPERM for ``unshare`` and ``clone``
    with ``CLONE_NEWUSER``, for ``perf_event_open`` and for another ABI; ENOSYS for
    ``clone3``; the rest allowed (the server makes each job's mount, PID and IPC
    namespaces).

    >>> len(server_program("x86_64")) // 8
    21

    Raises:
        ValueError: an architecture without a syscall table here (x86_64 and aarch64 only).
    """
    machine = _check_machine(machine)
    number = {name: table[machine] for name, table in SYSCALLS.items() if machine in table}
    program = _native_abi_only(machine)
    program += [_op(_JEQ_K, number["perf_event_open"], jf=1), _ret_errno(errno.EPERM)]
    program += [_op(_JEQ_K, number["clone3"], jf=1), _ret_errno(errno.ENOSYS)]
    for name in ("unshare", "clone"):
        program += _refuse_clone_flags(number[name], _CLONE_NEWUSER)
    program.append(_op(_RET_K, _RET_ALLOW))
    return b"".join(program)


def denylist_program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (default: this one's, ``platform.machine()``), as the raw
    array of ``struct sock_filter`` that ``bwrap --seccomp`` and ``PR_SET_SECCOMP`` take.

    Raises:
        ValueError: an architecture without a syscall table here (x86_64 and aarch64 only).
    """
    machine = _check_machine(machine)
    numbers = {name: table[machine] for name, table in SYSCALLS.items() if machine in table}
    eperm = _ret_errno(errno.EPERM)
    program = _native_abi_only(machine)
    for name in sorted(DENIED & numbers.keys()):
        program += [_op(_JEQ_K, numbers[name], jf=1), eperm]
    program += [_op(_JEQ_K, numbers["clone3"], jf=1), _ret_errno(errno.ENOSYS)]
    # clone: refused when args[0] carries a namespace flag
    program += _refuse_clone_flags(numbers["clone"], _CLONE_NAMESPACE_FLAGS)
    # personality: only the values Docker allows
    count = len(_PERSONALITIES)
    program += [_op(_JEQ_K, numbers["personality"], jf=count + 3), _op(_LD_W_ABS, _ARG0_LOW)]
    program += [_op(_JEQ_K, value, jt=count - i) for i, value in enumerate(_PERSONALITIES)]
    program += [eperm, _op(_LD_W_ABS, _NR)]
    program.append(_op(_RET_K, _RET_ALLOW))
    return b"".join(program)


@functools.lru_cache(maxsize=1)
def job_denylist() -> bytes | None:
    """The filter every sandbox that can install one gives its jobs: :func:`denylist_program`
    for this machine, or None where it has no syscall table here."""
    try:
        return denylist_program()
    except ValueError:
        return None
