"""Behaviour cloning of an action-chunking state policy, returned as a GRPO-ready policy.

:func:`fit_chunk_predictor` regresses, from each demonstrated state, the expert's next
``chunk_size`` actions (masked where the episode ends first) with a
:class:`~wmrl_env.integrations.vla.StateMLPBackbone` whose input normalisation comes from
the demonstrations; :func:`train_bc_policy` wraps the result in a
:class:`~wmrl_env.integrations.vla.ChunkedGaussianPolicy` (mean chunk = the cloned policy,
``log_std_init`` = the exploration GRPO starts from). :func:`save_policy` /
:func:`load_policy` keep the trained weights in one torch file.

Example (needs torch)::

    demos = collect_demonstrations("wmrl/Lift-v0", 30, noise=0.3, horizon=80)
    policy = train_bc_policy(demos, chunk_size=8, epochs=100, log_std_init=-1.5)
    policy(demos.observations[:4], [""] * 4).shape      # (4, 8, 7): mean chunks
    save_policy(policy, "runs/lift_bc.pt")
    policy = load_policy("runs/lift_bc.pt")
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.integrations.vla import ChunkedGaussianPolicy, StateMLPBackbone
from wmrl_env.robotics.demonstrations import Demonstrations
from wmrl_env.utils.imports import require

__all__ = [
    "action_chunks",
    "fit_chunk_predictor",
    "load_policy",
    "save_policy",
    "train_bc_policy",
]


def action_chunks(demos: Demonstrations, chunk_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each step's next ``chunk_size`` actions within its episode, and where they exist.

    Returns ``chunks`` ``(T, chunk_size, action_dim)`` (past an episode's end: its last
    action) and ``mask`` ``(T, chunk_size)`` (False past the end).

    >>> demos = Demonstrations.from_episodes(
    ...     "toy", [[(0, [a], 0, 0, False) for a in (1, 2, 3)], [(0, [9], 0, 0, False)]], [0, 1]
    ... )
    >>> chunks, mask = action_chunks(demos, 2)
    >>> chunks[..., 0].tolist()
    [[1.0, 2.0], [2.0, 3.0], [3.0, 3.0], [9.0, 9.0]]
    >>> mask.tolist()
    [[True, True], [True, True], [True, False], [True, False]]
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    steps = np.arange(demos.num_steps)
    ends = np.r_[demos.episode_starts[1:], demos.num_steps] - 1  # last step of each run
    last = ends[np.cumsum(np.isin(steps, demos.episode_starts)) - 1]
    ahead = steps[:, None] + np.arange(chunk_size)[None, :]
    mask = ahead <= last[:, None]
    return demos.actions[np.minimum(ahead, last[:, None])], mask


def fit_chunk_predictor(
    demos: Demonstrations,
    chunk_size: int = 8,
    hidden: int = 256,
    epochs: int = 100,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
) -> tuple[Any, list[float]]:
    """Train a ``StateMLPBackbone`` on the demonstrations' action chunks (masked MSE).

    Returns the backbone and the mean training loss of every epoch. Deterministic given
    ``seed`` (initial weights and minibatch order; torch's global RNG is left alone).
    """
    torch = require("torch", "behaviour cloning")
    if demos.num_steps == 0:
        raise ValueError("no demonstrations to clone")
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be >= 1, got {epochs}, {batch_size}")
    chunks, mask = action_chunks(demos, chunk_size)
    if np.abs(chunks).max() > 1.0:
        raise ValueError("demonstrated actions leave [-1, 1]: the tanh policy cannot fit them")
    observations = demos.observations
    backbone = StateMLPBackbone.build(
        observations.shape[1], chunk_size, demos.actions.shape[1], hidden=hidden, seed=seed
    )
    backbone.set_normalisation(observations)
    targets = torch.as_tensor(chunks, dtype=torch.float32)
    weights = torch.as_tensor(mask, dtype=torch.float32)[..., None]
    optimiser = torch.optim.AdamW(
        backbone.parameters(), lr=learning_rate, weight_decay=weight_decay
    )
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(epochs):
        order = torch.randperm(len(observations), generator=generator)
        total = 0.0
        for batch in order.split(batch_size):
            predicted = backbone(observations[batch.numpy()], [])
            error = (predicted - targets[batch]) ** 2 * weights[batch]
            loss = error.sum() / (weights[batch].sum() * chunks.shape[-1])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(batch)
        losses.append(total / len(observations))
    backbone.eval()
    return backbone, losses


def train_bc_policy(
    demos: Demonstrations,
    chunk_size: int = 8,
    instruction: str = "",
    log_std_init: float | Sequence[float] = -1.0,
    successful_only: bool = True,
    seed: int = 0,
    **fit_kwargs: Any,
) -> ChunkedGaussianPolicy:
    """Behaviour-clone ``demos`` into a :class:`ChunkedGaussianPolicy`.

    Args:
        demos: the demonstrations.
        chunk_size: actions per predicted chunk (execute them with ``ActionChunking``).
        instruction: the policy's task instruction.
        log_std_init: initial log std of the exploration noise GRPO samples with: one number,
            or one per action dimension (e.g. smaller for the rotation commands the
            demonstrations never used).
        successful_only: clone only the episodes that succeeded.
        seed: seeds the training and the policy's exploration noise.
        **fit_kwargs: ``hidden``, ``epochs``, ``batch_size``, ``learning_rate``,
            ``weight_decay`` of :func:`fit_chunk_predictor`.
    """
    if successful_only:
        kept = demos.successful()
        if kept.num_episodes == 0:
            raise ValueError(
                f"none of the {demos.num_episodes} demonstrations succeeded: nothing to clone"
            )
        demos = kept
    log_std = np.broadcast_to(np.asarray(log_std_init, np.float32), demos.actions.shape[1:]).copy()
    backbone, _ = fit_chunk_predictor(demos, chunk_size=chunk_size, seed=seed, **fit_kwargs)
    policy = ChunkedGaussianPolicy(backbone, instruction, seed=seed)
    with policy.torch.no_grad():
        policy.log_std.copy_(policy.torch.as_tensor(log_std))
    return policy


def save_policy(policy: ChunkedGaussianPolicy, path: str | Path) -> Path:
    """Write a policy made by :func:`train_bc_policy` (weights, std, shape) to ``path``."""
    torch = require("torch", "behaviour cloning")
    backbone = policy.backbone
    first, last = backbone.net[0], backbone.net[-1]
    record = {
        "observation_dim": first.in_features,
        "hidden": first.out_features,
        "chunk_size": backbone.chunk_size,
        "action_dim": backbone.action_dim,
        "instruction": policy.instruction,
        "backbone": backbone.state_dict(),
        "log_std": policy.log_std.detach().clone(),
    }
    if last.out_features != backbone.chunk_size * backbone.action_dim:
        raise ValueError("policy's backbone is not a StateMLPBackbone")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(record, path)
    return path


def load_policy(path: str | Path, seed: int = 0) -> ChunkedGaussianPolicy:
    """Read what :func:`save_policy` wrote; ``seed`` seeds the exploration noise."""
    torch = require("torch", "behaviour cloning")
    record = torch.load(Path(path), weights_only=True)
    backbone = StateMLPBackbone.build(
        record["observation_dim"], record["chunk_size"], record["action_dim"], record["hidden"]
    )
    backbone.load_state_dict(record["backbone"])
    backbone.eval()
    policy = ChunkedGaussianPolicy(backbone, record["instruction"], seed=seed)
    with torch.no_grad():
        policy.log_std.copy_(record["log_std"])
    return policy
