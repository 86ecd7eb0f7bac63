"""What crosses the pipe between :class:`SubprocessEnv` and its worker.

The two ends may run different interpreters with different NumPy and gymnasium versions, so
nothing is pickled as a NumPy or gymnasium object: arrays travel as ``(dtype, shape, bytes)``
and spaces as plain descriptions. What remains (dicts, lists, tuples, str, numbers, bytes) is
pickled with protocol 4, which every supported Python reads.

Example:
    >>> import numpy as np, gymnasium as gym
    >>> message = encode({"obs": np.arange(3, dtype=np.float32), "done": np.bool_(True)})
    >>> decode(message)
    {'obs': array([0., 1., 2.], dtype=float32), 'done': True}
    >>> space = gym.spaces.Dict({"state": gym.spaces.Box(-1, 1, (2,)), "k": gym.spaces.Discrete(3)})
    >>> space_from_spec(space_to_spec(space)) == space
    True
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["FORWARDED_METHODS", "decode", "encode", "space_from_spec", "space_to_spec"]

# environment methods requested by name; the request ``call`` reaches any other method or
# attribute of the remote environment
FORWARDED_METHODS = frozenset({"reset", "step", "render", "get_snapshot", "restore_snapshot"})

_ARRAY = "__ndarray__"


def encode(value: Any) -> Any:
    """Replace every NumPy array and scalar in ``value`` (recursively) by plain data."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        return {_ARRAY: (array.dtype.str, array.shape, array.tobytes())}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(encode(item) for item in value)
    return value


def decode(value: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(value, dict):
        if set(value) == {_ARRAY}:
            dtype, shape, data = value[_ARRAY]
            return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape).copy()
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(decode(item) for item in value)
    return value


def space_to_spec(space: gym.Space) -> dict[str, Any]:
    """A plain description of a gymnasium space (Box, Discrete, MultiBinary, MultiDiscrete,
    Dict, Tuple)."""
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "low": encode(space.low), "high": encode(space.high)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": encode(np.asarray(space.n))}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": encode(space.nvec)}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_spec(s) for k, s in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_spec(s) for s in space.spaces]}
    raise TypeError(f"cannot send a {type(space).__name__} space between processes")


def space_from_spec(spec: dict[str, Any]) -> gym.Space:
    """Inverse of :func:`space_to_spec`."""
    kind = spec["type"]
    if kind == "Box":
        low, high = decode(spec["low"]), decode(spec["high"])
        return gym.spaces.Box(low, high, dtype=low.dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(spec["n"], start=spec["start"])
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(decode(spec["n"]).tolist())
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(decode(spec["nvec"]))
    if kind == "Dict":
        return gym.spaces.Dict({k: space_from_spec(s) for k, s in spec["spaces"].items()})
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_spec(s) for s in spec["spaces"]])
    raise ValueError(f"unknown space type {kind!r}")
