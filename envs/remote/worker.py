"""The worker side of :class:`~wmrl_env.envs.remote.SubprocessEnv`.

Run as ``python -m wmrl_env.envs.remote.worker FD`` by the parent, in whatever interpreter
hosts the environment; ``FD`` is the worker's end of a socket pair. The worker builds the
environment, reports its spaces, then serves requests until it is told to close or the
parent goes away.

Requests are ``(method, args, kwargs)``; replies are ``("ok", result)`` or
``("error", exception type, message, traceback)``. An exception in the environment is
reported and the worker keeps serving; only construction errors end it.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from wmrl_env.envs.remote.protocol import FORWARDED_METHODS, decode, encode, space_to_spec


def load_entry_point(entry_point: str) -> Any:
    """``"package.module:attribute"`` -> the attribute."""
    module_name, sep, attribute = entry_point.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"entry point must look like 'package.module:Class', got {entry_point!r}")
    return getattr(importlib.import_module(module_name), attribute)


def _error(exc: BaseException) -> tuple[str, str, str, str]:
    return ("error", type(exc).__name__, str(exc), traceback.format_exc())


def _describe(env: Any) -> dict[str, Any]:
    return {
        "observation_space": space_to_spec(env.observation_space),
        "action_space": space_to_spec(env.action_space),
        "metadata": encode(dict(env.metadata)),
        "render_mode": env.render_mode,
        "methods": [m for m in ("get_snapshot", "restore_snapshot") if hasattr(env, m)],
    }


def _handle(env: Any, method: str, args: tuple, kwargs: dict) -> Any:
    if method == "call":
        name, *rest = args
        target = getattr(env, name)
        return target(*rest, **kwargs) if callable(target) else target
    if method not in FORWARDED_METHODS:
        raise ValueError(f"unknown request {method!r}")
    return getattr(env, method)(*args, **kwargs)


def serve(conn: Connection, entry_point: str, kwargs: dict[str, Any]) -> None:
    """Build the environment, then answer requests until ``close`` or end of input."""
    try:
        env = load_entry_point(entry_point)(**kwargs)
        conn.send(("ok", _describe(env)))
    except BaseException as exc:
        conn.send(_error(exc))
        return
    closing = False
    try:
        while not closing:
            try:
                method, args, call_kwargs = conn.recv()
            except EOFError:
                return
            closing = method == "close"
            if closing:
                continue
            try:
                result = _handle(env, method, decode(args), decode(call_kwargs))
                conn.send(("ok", encode(result)))
            except Exception as exc:
                conn.send(_error(exc))
    finally:
        env.close()
    conn.send(("ok", None))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m wmrl_env.envs.remote.worker FD", file=sys.stderr)
        return 2
    conn = Connection(int(argv[0]))
    # an environment that asks a question on stdin (LIBERO's first import) gets EOF, not a hang
    sys.stdin = open(os.devnull)  # noqa: SIM115
    try:
        entry_point, kwargs = conn.recv()
        serve(conn, entry_point, decode(kwargs))
    except (EOFError, BrokenPipeError):
        return 1
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
