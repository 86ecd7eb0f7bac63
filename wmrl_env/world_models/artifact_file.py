"""A world model's saved state as one ``.npz`` file that needs NumPy alone to read: no pickle,
so no scikit-learn (or NumPy) version to match and no code run on load.

The file holds a JSON ``header`` that describes the state's structure and one array per
NumPy array in it. What it stores: ``None``, booleans, numbers, strings, lists, tuples,
dicts with string keys, NumPy arrays (not of objects) and frozen dataclasses of
``wmrl_env`` built from these (:class:`~wmrl_env.world_models.programs.tree_ensemble.TreeEnsemble`
is how boosters are stored). Anything else is refused when saving.

Example:
    >>> import tempfile
    >>> state = {"seed": 3, "range": (0.0, 1.0), "mean": np.arange(3.0), "names": ["a"]}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = write_state(state, Path(folder) / "state.npz")
    ...     loaded = read_state(path)
    >>> loaded["range"], loaded["mean"], loaded["names"]
    ((0.0, 1.0), array([0., 1., 2.]), ['a'])
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["is_state_file", "read_state", "write_state"]

_MAGIC = "wmrl-state"
_CONTAINER = 1

# Modules that release 0.2.0 wrote into saved states, where they live now (its states load).
_MOVED_IN_0_3 = {
    f"wmrl_env.world_models.{name}": f"wmrl_env.world_models.programs.{name}"
    for name in (
        "ml_default",
        "pretraining",
        "program_covariance",
        "program_features",
        "program_outcomes",
        "program_profile",
        "program_rows",
        "program_task",
        "status_model",
        "task_residual",
        "tree_classifier",
        "tree_ensemble",
    )
}


def is_state_file(path: str | Path) -> bool:
    """Whether ``path`` is a ``.npz`` state file (a zip archive) rather than a pickle."""
    return zipfile.is_zipfile(path)


def write_state(state: Mapping[str, Any], path: str | Path) -> Path:
    """Save ``state`` (string keys) to ``path`` (a compressed ``.npz``)."""
    arrays: dict[str, np.ndarray] = {}
    tree = {key: _encode(value, arrays, key) for key, value in _checked(state, "state").items()}
    header = {"format": _MAGIC, "container": _CONTAINER, "state": tree}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, header=np.array(json.dumps(header)), **arrays)
    path.write_bytes(buffer.getvalue())
    return path


def read_state(path: str | Path) -> dict[str, Any]:
    """The state saved at ``path`` by :func:`write_state`."""
    with np.load(path, allow_pickle=False) as stored:
        if "header" not in stored.files:
            raise ValueError(f"{path}: not a saved world-model state (no header)")
        header = json.loads(str(stored["header"]))
        if not isinstance(header, dict) or header.get("format") != _MAGIC:
            raise ValueError(f"{path}: not a saved world-model state")
        if header.get("container") != _CONTAINER:
            raise ValueError(
                f"{path}: state container {header.get('container')}, this code reads {_CONTAINER}"
            )
        arrays = {name: stored[name] for name in stored.files if name != "header"}
    return {key: _decode(value, arrays) for key, value in header["state"].items()}


def _checked(mapping: Mapping[Any, Any], where: str) -> Mapping[str, Any]:
    bad = [key for key in mapping if not isinstance(key, str)]
    if bad:
        raise TypeError(f"{where}: keys must be strings, got {bad[:3]}")
    return mapping


def _encode(value: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"{where}: arrays of Python objects cannot be saved")
        name = f"a{len(arrays)}"
        arrays[name] = value
        return {"array": name}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, arrays, f"{where}[{i}]") for i, item in enumerate(value)]
        return {"tuple": items} if isinstance(value, tuple) else {"list": items}
    if isinstance(value, Mapping):
        items = _checked(value, where).items()
        return {"dict": {key: _encode(item, arrays, f"{where}.{key}") for key, item in items}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if not cls.__module__.startswith("wmrl_env."):
            raise TypeError(f"{where}: only wmrl_env's dataclasses can be saved, got {cls}")
        fields = {
            field.name: _encode(getattr(value, field.name), arrays, f"{where}.{field.name}")
            for field in dataclasses.fields(value)
            if field.init
        }
        return {"dataclass": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    raise TypeError(f"{where}: a {type(value).__name__} cannot be saved")


def _decode(value: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if not isinstance(value, dict):
        return value
    if "array" in value:
        return arrays[value["array"]]
    if "tuple" in value:
        return tuple(_decode(item, arrays) for item in value["tuple"])
    if "list" in value:
        return [_decode(item, arrays) for item in value["list"]]
    if "dict" in value:
        return {key: _decode(item, arrays) for key, item in value["dict"].items()}
    module, _, name = value["dataclass"].partition(":")
    module = _MOVED_IN_0_3.get(module, module)
    if not module.startswith("wmrl_env."):
        raise ValueError(f"a saved state names {value['dataclass']}, outside wmrl_env")
    try:
        cls = importlib.import_module(module)
        for part in name.split("."):
            cls = getattr(cls, part)
    except (ImportError, AttributeError) as error:
        raise ValueError(
            f"a saved state names {value['dataclass']}, which this version of wmrl_env does "
            "not have (saved by another version: save it again with this one)"
        ) from error
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"a saved state names {value['dataclass']}, not a dataclass")
    return cls(**{key: _decode(item, arrays) for key, item in value["fields"].items()})
