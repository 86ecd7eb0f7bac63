"""Low-dimensional state vectors from robosuite's observation dicts.

robosuite groups its low-dimensional observations into modality vectors: one
``robot<i>_proprio-state`` per robot and one ``object-state``. The flat state of an
environment is their concatenation, robots first, as float32.

Example:
    >>> import numpy as np
    >>> obs = {"object-state": np.ones(2), "robot0_proprio-state": np.zeros(3)}
    >>> keys = state_keys(obs)
    >>> keys
    ('robot0_proprio-state', 'object-state')
    >>> flatten_state(obs, keys)
    array([0., 0., 0., 1., 1.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["flatten_state", "state_keys"]


def state_keys(observation: Mapping[str, np.ndarray]) -> tuple[str, ...]:
    """The modality keys that make up the low-dimensional state, robots first."""
    robots = sorted(k for k in observation if k.endswith("_proprio-state"))
    objects = [k for k in ("object-state",) if k in observation]
    if not robots:
        raise ValueError(
            "observation has no '*_proprio-state' entry: build the robosuite environment with "
            f"use_object_obs=True and the default observables (keys: {sorted(observation)})"
        )
    return (*robots, *objects)


def flatten_state(observation: Mapping[str, np.ndarray], keys: Sequence[str]) -> np.ndarray:
    """Concatenate ``observation[k]`` for ``k`` in ``keys`` into one float32 vector."""
    return np.concatenate([np.asarray(observation[k]).ravel() for k in keys]).astype(np.float32)
