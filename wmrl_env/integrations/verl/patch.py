"""The one patch point: hands each batch row's sample key to the fused advantage estimator.

verl calls a registered advantage estimator with the reward tensor and the rows' ``uid`` only,
so by itself the estimator can find a row's record only by ``(uid, reward value)``, which
breaks as soon as anything edits the reward (an overlong penalty, a format bonus, a KL term, a
dtype change). :func:`patch_compute_advantage` wraps the two functions verl's trainers call
around the estimator, by name in the module that calls them, so that during the call the
estimator can read each row's key:

* the v1 trainer (``trainer.use_v1=True``, verl's default): ``trainer_base.
  compute_advantage_for_multi_trajectories(data, batch_keys, ...)``; a row's key is its
  TransferQueue key ``{uid}_{session_id}_{index}`` without the index, which the reward manager
  builds from the ``uid`` and ``session_id`` it sees;
* the legacy trainer: ``ray_trainer.compute_advantage(data, ...)``; the key is the
  ``wmrl_key`` column the reward manager returned in ``reward_extra_info`` (verl copies it
  into ``non_tensor_batch``).

The wrapping changes nothing else (arguments and result pass through) and is idempotent;
:func:`~wmrl_env.integrations.verl.register_estimator` applies it.

Example:
    >>> with row_keys(["g0_0", "g0_1"]):
    ...     current_row_keys()
    ['g0_0', 'g0_1']
    >>> current_row_keys() is None
    True
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from wmrl_env.utils.imports import require

__all__ = ["current_row_keys", "patch_compute_advantage", "row_keys", "sample_key"]

KEY_COLUMN = "wmrl_key"
_ROW_KEYS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "wmrl_row_keys", default=None
)


def sample_key(uid: str, session_id: Any) -> str:
    """The key of one sample: its TransferQueue key without the output index.

    >>> sample_key("u1", 3)
    'u1_3'
    """
    return f"{uid}_{session_id}"


@contextlib.contextmanager
def row_keys(keys: Sequence[str] | None) -> Iterator[None]:
    """The batch rows' sample keys, for the estimator called inside this block."""
    token = _ROW_KEYS.set(None if keys is None else [str(k) for k in keys])
    try:
        yield
    finally:
        _ROW_KEYS.reset(token)


def current_row_keys() -> list[str] | None:
    """The rows' keys of the advantage call in progress, or ``None`` outside the patch."""
    return _ROW_KEYS.get()


def _multi_trajectory_keys(batch_keys: Sequence[str]) -> list[str]:
    return [str(key).rsplit("_", 1)[0] for key in batch_keys]


def _wrap_v1(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantage_for_multi_trajectories(data: Any, batch_keys: Any, *args, **kwargs):
        with row_keys(_multi_trajectory_keys(batch_keys)):
            return original(data, batch_keys, *args, **kwargs)

    compute_advantage_for_multi_trajectories.__wmrl_patched__ = True
    return compute_advantage_for_multi_trajectories


def _wrap_legacy(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantage(data: Any, *args: Any, **kwargs: Any) -> Any:
        if current_row_keys() is not None:  # inside the v1 wrapper already
            return original(data, *args, **kwargs)
        column = data.non_tensor_batch.get(KEY_COLUMN)
        with row_keys(None if column is None else list(column)):
            return original(data, *args, **kwargs)

    compute_advantage.__wmrl_patched__ = True
    return compute_advantage


def patch_compute_advantage() -> None:
    """Wrap verl's advantage entry points (v1 and legacy trainer) to pass row keys."""
    targets = (
        ("verl.trainer.ppo.v1.trainer_base", "compute_advantage_for_multi_trajectories", _wrap_v1),
        ("verl.trainer.ppo.v1.utils", "compute_advantage_for_multi_trajectories", _wrap_v1),
        ("verl.trainer.ppo.ray_trainer", "compute_advantage", _wrap_legacy),
    )
    require("verl", "the verl integration")
    for module_name, name, wrap in targets:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # an older or newer verl without this trainer
            continue
        original = getattr(module, name, None)
        if original is None:
            continue
        if not getattr(original, "__wmrl_patched__", False):
            setattr(module, name, wrap(original))
