"""A learned dynamics world model: a probabilistic ensemble over low-dimensional state (torch).

:class:`EnsembleDynamicsModel` predicts, for a batch of (state, action) pairs, the next-state
*delta*, the reward and the probability that the episode terminates (a success, for LIBERO's
binary reward), as in PETS / MBPO:

* ``E`` independent MLPs, each trained on its own bootstrap of the real transitions, each
  predicting a Gaussian (mean, log-variance) over the normalised ``[delta, reward]`` and a
  Bernoulli logit for termination;
* inputs and targets are standardised with statistics of the training data;
* a held-out split (``validation_fraction``) scores every epoch; training stops when no member
  improved for ``patience`` epochs and each member keeps its best weights;
* :meth:`~EnsembleDynamicsModel.predict_step` answers a whole batch in one call with the
  ensemble mean (deterministic; rewards clipped to the range seen in the training data, so a
  model queried far off its data cannot invent rewards); its ``std`` is the members'
  *disagreement* (std across members of their predicted means, in normalised units, averaged
  over outputs): the epistemic uncertainty, high off the data the model has seen;
* :meth:`~EnsembleDynamicsModel.update` adds real transitions (the anchor groups') and refits,
  warm-started; :meth:`~EnsembleDynamicsModel.imagine` rolls out a batch open-loop.

:class:`TorchDynamicsAdapter` plugs in a user's own model (image or video world model): any
torch module mapping ``(observations, actions)`` to ``(next_observations, rewards[,
termination_logits])``.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> obs, act = rng.normal(size=(512, 3)), rng.uniform(-1, 1, (512, 1))
    >>> next_obs = obs + 0.1 * act                      # a tiny linear system
    >>> model = EnsembleDynamicsModel(3, 1, EnsembleConfig(ensemble_size=3, hidden_sizes=(32,),
    ...                               max_epochs=30, seed=0))
    >>> report = model.fit(obs, act, next_obs, rewards=act[:, 0], terminations=np.zeros(512))
    >>> step = model.predict_step(obs[:4], act[:4])
    >>> step.next_observations.shape, step.rewards.shape, step.std.shape
    ((4, 3), (4,), (4,))
    >>> bool(np.abs(step.next_observations - next_obs[:4]).max() < 0.1)
    True
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from wmrl_env.utils.imports import require
from wmrl_env.world_models.base import StepPrediction

__all__ = [
    "EnsembleConfig",
    "EnsembleDynamicsModel",
    "FitReport",
    "ImaginedRollout",
    "TorchDynamicsAdapter",
    "TransitionBuffer",
]


@dataclass
class EnsembleConfig:
    """Hyper-parameters of :class:`EnsembleDynamicsModel`."""

    ensemble_size: int = 5
    """number of independently initialised, bootstrapped members"""
    hidden_sizes: tuple[int, ...] = (200, 200)
    """hidden layer widths of every member"""
    learning_rate: float = 1e-3
    """Adam learning rate"""
    weight_decay: float = 1e-5
    """L2 penalty on the weights"""
    batch_size: int = 256
    """minibatch size per member"""
    max_epochs: int = 200
    """upper bound on passes over the training split per fit"""
    patience: int = 10
    """epochs without a validation improvement before stopping"""
    validation_fraction: float = 0.2
    """share of transitions held out to score epochs (none when fewer than 10 transitions)"""
    termination_threshold: float = 0.5
    """predicted termination probability above which an imagined episode ends"""
    bootstrap: bool = True
    """train each member on its own resample of the training split"""
    seed: int = 0
    """seeds initialisation, splits, bootstraps and minibatches"""
    device: str = "cpu"
    """torch device"""

    def __post_init__(self) -> None:
        self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)
        if self.ensemble_size < 1 or any(h < 1 for h in self.hidden_sizes):
            raise ValueError("ensemble_size and hidden sizes must be >= 1")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1): {self.validation_fraction}")
        if self.max_epochs < 1 or self.patience < 1 or self.batch_size < 1:
            raise ValueError("max_epochs, patience and batch_size must be >= 1")
        if not 0.0 < self.termination_threshold < 1.0:
            raise ValueError("termination_threshold must be in (0, 1)")


@dataclass(frozen=True)
class FitReport:
    """What one :meth:`EnsembleDynamicsModel.fit` did."""

    epochs: int
    train_size: int
    validation_size: int
    train_loss: float
    validation_loss: float
    """mean over members of their best held-out loss (NaN without a held-out split)"""
    validation_mse: float
    """held-out mean squared error of the ensemble mean, normalised units"""
    stopped_early: bool


@dataclass(frozen=True)
class ImaginedRollout:
    """A batch of open-loop rollouts in the model (``N`` starts, ``H`` steps)."""

    observations: np.ndarray
    """``(N, H + 1, obs_dim)``: the starts, then each predicted state"""
    rewards: np.ndarray
    """``(N, H)``; 0 after a predicted termination"""
    terminations: np.ndarray
    """``(N, H)`` bool; True from the first predicted termination on"""
    uncertainty: np.ndarray
    """``(N, H)`` ensemble disagreement of each step"""


@dataclass
class TransitionBuffer:
    """Real transitions, appended batch by batch (the anchor groups' steps)."""

    observations: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    next_observations: list[np.ndarray] = field(default_factory=list)
    rewards: list[np.ndarray] = field(default_factory=list)
    terminations: list[np.ndarray] = field(default_factory=list)

    def add(
        self,
        observations: np.ndarray,
        actions: np.ndarray,
        next_observations: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
    ) -> None:
        """Append a batch of transitions (checked for shapes and finite values)."""
        batch = _check_transitions(observations, actions, next_observations, rewards, terminations)
        for store, values in zip(
            (self.observations, self.actions, self.next_observations, self.rewards),
            batch[:4],
            strict=True,
        ):
            store.append(values)
        self.terminations.append(batch[4])

    def __len__(self) -> int:
        return sum(len(r) for r in self.rewards)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """All transitions: observations, actions, next observations, rewards, terminations."""
        if not self.rewards:
            raise ValueError("the buffer is empty")
        return tuple(
            np.concatenate(store)
            for store in (
                self.observations,
                self.actions,
                self.next_observations,
                self.rewards,
                self.terminations,
            )
        )


def _as_2d(name: str, values: Any, width: int | None = None) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1 and width == 1:
        array = array[:, None]
    if array.ndim != 2 or (width is not None and array.shape[1] != width):
        expected = f"(N, {width})" if width is not None else "(N, D)"
        raise ValueError(f"{name} must have shape {expected}, got {array.shape}")
    return array


def _check_transitions(
    observations: Any, actions: Any, next_observations: Any, rewards: Any, terminations: Any
) -> tuple[np.ndarray, ...]:
    obs = _as_2d("observations", observations)
    act = _as_2d("actions", actions)
    nxt = _as_2d("next_observations", next_observations, obs.shape[1])
    rew = np.asarray(rewards, dtype=np.float64).reshape(-1)
    term = np.asarray(terminations, dtype=bool).reshape(-1)
    n = obs.shape[0]
    lengths = {"actions": len(act), "next_observations": len(nxt), "rewards": len(rew)}
    lengths["terminations"] = len(term)
    wrong = {name: length for name, length in lengths.items() if length != n}
    if wrong:
        raise ValueError(f"{n} observations but {wrong}")
    for name, array in (("observations", obs), ("actions", act), ("next_observations", nxt)):
        if not np.isfinite(array).all():
            raise ValueError(f"{name} contain NaN or inf")
    if not np.isfinite(rew).all():
        raise ValueError("rewards contain NaN or inf")
    return obs, act, nxt, rew, term


def _standardiser(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std per column; constant columns get std 1 (left unscaled)."""
    mean = values.mean(axis=0)
    std = values.std(axis=0)
    return mean, np.where(std < 1e-8, 1.0, std)


class EnsembleDynamicsModel:
    """A probabilistic ensemble dynamics model; see the module docstring.

    Args:
        observation_dim: size of the flat state vector.
        action_dim: size of the flat action vector.
        config: :class:`EnsembleConfig` (defaults: 5 members of 200x200).
    """

    def __init__(
        self, observation_dim: int, action_dim: int, config: EnsembleConfig | None = None
    ) -> None:
        self.torch = require("torch", "EnsembleDynamicsModel")
        if observation_dim < 1 or action_dim < 1:
            raise ValueError("observation_dim and action_dim must be >= 1")
        self.observation_dim, self.action_dim = int(observation_dim), int(action_dim)
        self.config = config or EnsembleConfig()
        self.buffer = TransitionBuffer()
        self._rng = np.random.default_rng(self.config.seed)
        self._network = _build_ensemble(
            self.torch,
            self.observation_dim + self.action_dim,
            self.observation_dim + 1,
            self.config,
        )
        self._optimizer = self.torch.optim.Adam(
            self._network.parameters(),
            lr=self.config.learning_rate,
            weight_decay=self.config.weight_decay,
        )
        self._input_stats: tuple[np.ndarray, np.ndarray] | None = None
        self._target_stats: tuple[np.ndarray, np.ndarray] | None = None
        self._reward_range = (-np.inf, np.inf)

    @property
    def is_fitted(self) -> bool:
        return self._input_stats is not None

    # ----------------------------------------------------------------- training
    def fit(
        self,
        observations: np.ndarray,
        actions: np.ndarray,
        next_observations: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
    ) -> FitReport:
        """Train on these transitions (replacing the normalisation statistics)."""
        obs, act, nxt, rew, term = _check_transitions(
            observations, actions, next_observations, rewards, terminations
        )
        if obs.shape[1] != self.observation_dim or act.shape[1] != self.action_dim:
            raise ValueError(
                f"expected observations of width {self.observation_dim} and actions of width "
                f"{self.action_dim}, got {obs.shape[1]} and {act.shape[1]}"
            )
        if len(obs) < 2:
            raise ValueError("need at least 2 transitions to fit")
        inputs = np.concatenate([obs, act], axis=1)
        targets = np.concatenate([nxt - obs, rew[:, None]], axis=1)
        self._input_stats = _standardiser(inputs)
        self._target_stats = _standardiser(targets)
        self._reward_range = (float(rew.min()), float(rew.max()))
        x = (inputs - self._input_stats[0]) / self._input_stats[1]
        y = (targets - self._target_stats[0]) / self._target_stats[1]
        return self._train(x, y, term.astype(np.float64))

    def update(
        self,
        observations: np.ndarray,
        actions: np.ndarray,
        next_observations: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
    ) -> FitReport:
        """Add real transitions to :attr:`buffer` and refit on all of it (warm start)."""
        self.buffer.add(observations, actions, next_observations, rewards, terminations)
        return self.fit(*self.buffer.arrays())

    def _split(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        order = self._rng.permutation(n)
        held_out = round(n * self.config.validation_fraction) if n >= 10 else 0
        return order[held_out:], order[:held_out]

    def _train(self, x: np.ndarray, y: np.ndarray, term: np.ndarray) -> FitReport:
        torch, config = self.torch, self.config
        train_idx, val_idx = self._split(len(x))
        members = config.ensemble_size
        if config.bootstrap:
            per_member = self._rng.integers(0, len(train_idx), (members, len(train_idx)))
            member_idx = train_idx[per_member]
        else:
            member_idx = np.tile(train_idx, (members, 1))
        as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32, device=config.device)  # noqa: E731
        X, Y, T = as_tensor(x), as_tensor(y), as_tensor(term)
        best = np.full(members, np.inf)
        best_state = copy.deepcopy(self._network.state_dict())
        stale, epoch, train_loss = 0, 0, math.nan
        generator = torch.Generator().manual_seed(int(self._rng.integers(2**31)))
        for epoch in range(1, config.max_epochs + 1):  # noqa: B007
            train_loss = self._epoch(X, Y, T, member_idx, generator)
            if len(val_idx) == 0:
                continue
            losses = self._member_losses(X[val_idx], Y[val_idx], T[val_idx])
            margin = np.where(np.isfinite(best), 1e-4 * np.abs(best).clip(min=1.0), 0.0)
            improved = losses < best - margin
            if improved.any():
                best[improved] = losses[improved]
                self._copy_members(best_state, self._network.state_dict(), improved)
                stale = 0
            else:
                stale += 1
                if stale >= config.patience:
                    break
        if len(val_idx):
            self._network.load_state_dict(best_state)
        val_mse = self._validation_mse(X[val_idx], Y[val_idx]) if len(val_idx) else math.nan
        return FitReport(
            epochs=epoch,
            train_size=len(train_idx),
            validation_size=len(val_idx),
            train_loss=train_loss,
            validation_loss=float(best.mean()) if len(val_idx) else math.nan,
            validation_mse=val_mse,
            stopped_early=epoch < config.max_epochs,
        )

    def _epoch(self, X, Y, T, member_idx: np.ndarray, generator) -> float:
        torch = self.torch
        self._network.train()
        n = member_idx.shape[1]
        order = torch.randperm(n, generator=generator).numpy()
        total, batches = 0.0, 0
        for start in range(0, n, self.config.batch_size):
            rows = member_idx[:, order[start : start + self.config.batch_size]]  # (E, B)
            rows_t = torch.as_tensor(rows, device=X.device)
            mean, log_var, logit = self._network(X[rows_t])
            loss = _nll(torch, mean, log_var, Y[rows_t], logit, T[rows_t]).sum()
            loss = loss + 0.01 * (self._network.max_log_var.sum() - self._network.min_log_var.sum())
            self._optimizer.zero_grad()
            loss.backward()
            self._optimizer.step()
            total, batches = total + float(loss.detach()), batches + 1
        return total / max(batches, 1)

    def _member_losses(self, X, Y, T) -> np.ndarray:
        torch = self.torch
        self._network.eval()
        with torch.no_grad():
            E = self.config.ensemble_size
            mean, _, logit = self._network(X.unsqueeze(0).expand(E, -1, -1))
            targets = Y.unsqueeze(0).expand(E, -1, -1)
            # model selection on the mean's squared error plus the termination loss
            mse = ((mean - targets) ** 2).mean(dim=(1, 2))
            bce = torch.nn.functional.binary_cross_entropy_with_logits(
                logit.squeeze(-1), T.unsqueeze(0).expand(E, -1), reduction="none"
            ).mean(dim=1)
        return (mse + bce).cpu().numpy()

    def _validation_mse(self, X, Y) -> float:
        torch = self.torch
        with torch.no_grad():
            E = self.config.ensemble_size
            mean, _, _ = self._network(X.unsqueeze(0).expand(E, -1, -1))
        return float(((mean.mean(0) - Y) ** 2).mean())

    def _copy_members(self, target: dict, source: dict, members: np.ndarray) -> None:
        for name, value in source.items():
            if value.dim() and value.shape[0] == self.config.ensemble_size:
                index = self.torch.as_tensor(np.flatnonzero(members))
                target[name][index] = value[index].detach().clone()

    # --------------------------------------------------------------- prediction
    def _normalised_inputs(self, observations: np.ndarray, actions: np.ndarray):
        if not self.is_fitted:
            raise RuntimeError("the dynamics model has not been fitted: call fit() first")
        obs = _as_2d("observations", observations, self.observation_dim)
        act = _as_2d("actions", np.asarray(actions).reshape(len(actions), -1), self.action_dim)
        if len(obs) != len(act):
            raise ValueError(f"{len(obs)} observations but {len(act)} actions")
        x = (np.concatenate([obs, act], axis=1) - self._input_stats[0]) / self._input_stats[1]
        return obs, self.torch.as_tensor(x, dtype=self.torch.float32, device=self.config.device)

    def predict_step(self, observations: np.ndarray, actions: np.ndarray) -> StepPrediction:
        """One imagined step for every (observation, action) pair, in one batched call."""
        obs, x = self._normalised_inputs(observations, actions)
        torch = self.torch
        self._network.eval()
        with torch.no_grad():
            E = self.config.ensemble_size
            mean, _, logit = self._network(x.unsqueeze(0).expand(E, -1, -1))
            mean = mean.double().cpu().numpy()  # (E, N, obs_dim + 1)
            probability = torch.sigmoid(logit.double()).mean(0).squeeze(-1).cpu().numpy()
        centre = mean.mean(axis=0) * self._target_stats[1] + self._target_stats[0]
        disagreement = mean.std(axis=0).mean(axis=1) if E > 1 else np.zeros(len(obs))
        next_obs = (obs + centre[:, :-1]).astype(np.asarray(observations).dtype, copy=False)
        return StepPrediction(
            next_observations=next_obs,
            rewards=np.clip(centre[:, -1], *self._reward_range),
            terminations=probability > self.config.termination_threshold,
            std=disagreement,
            valid=np.isfinite(centre).all(axis=1),
        )

    def imagine(
        self,
        observations: np.ndarray,
        actions: np.ndarray | Callable[[np.ndarray], np.ndarray],
        horizon: int | None = None,
    ) -> ImaginedRollout:
        """Roll ``N`` starts forward: ``actions`` is ``(N, H, action_dim)`` (open loop) or a
        policy ``f(observations) -> actions`` (then give ``horizon``). Terminations stick."""
        obs = _as_2d("observations", observations, self.observation_dim).astype(np.float32)
        if callable(actions):
            if horizon is None or horizon < 1:
                raise ValueError("give horizon >= 1 with a policy")
            policy, steps = actions, horizon
        else:
            plan = np.asarray(actions, dtype=np.float32)
            if plan.ndim != 3 or plan.shape[0] != len(obs):
                raise ValueError(f"actions must be (N={len(obs)}, H, action_dim), got {plan.shape}")
            policy, steps = None, plan.shape[1]
        states, rewards, done, uncertainty = [obs], [], [], []
        ended = np.zeros(len(obs), dtype=bool)
        for t in range(steps):
            action = policy(states[-1]) if policy is not None else plan[:, t]
            step = self.predict_step(states[-1], action)
            states.append(np.where(ended[:, None], states[-1], step.next_observations))
            rewards.append(np.where(ended, 0.0, step.rewards))
            ended = ended | step.terminations
            done.append(ended.copy())
            uncertainty.append(step.std)
        return ImaginedRollout(
            observations=np.stack(states, axis=1),
            rewards=np.stack(rewards, axis=1),
            terminations=np.stack(done, axis=1),
            uncertainty=np.stack(uncertainty, axis=1),
        )

    # ---------------------------------------------------------------- persistence
    def state_dict(self) -> dict[str, Any]:
        """Weights, normalisation and configuration (``torch.save``-able)."""
        return {
            "config": asdict(self.config),
            "dims": (self.observation_dim, self.action_dim),
            "network": self._network.state_dict(),
            "input_stats": self._input_stats,
            "target_stats": self._target_stats,
            "reward_range": self._reward_range,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if tuple(state["dims"]) != (self.observation_dim, self.action_dim):
            raise ValueError(
                f"state is for dims {state['dims']}, this model has "
                f"{(self.observation_dim, self.action_dim)}"
            )
        self._network.load_state_dict(state["network"])
        self._input_stats, self._target_stats = state["input_stats"], state["target_stats"]
        self._reward_range = tuple(state["reward_range"])


def _nll(torch, mean, log_var, target, logit, term):
    """Gaussian negative log-likelihood per member plus the termination cross-entropy."""
    gaussian = (((mean - target) ** 2) * torch.exp(-log_var) + log_var).mean(dim=(1, 2))
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        logit.squeeze(-1), term, reduction="none"
    ).mean(dim=1)
    return gaussian + bce


def _build_ensemble(torch, inputs: int, outputs: int, config: EnsembleConfig):
    """``E`` MLPs evaluated together (batched matrix products), with soft log-variance bounds."""
    nn = torch.nn

    class EnsembleLinear(nn.Module):
        def __init__(self, members: int, fan_in: int, fan_out: int) -> None:
            super().__init__()
            bound = 1.0 / math.sqrt(fan_in)
            self.weight = nn.Parameter(
                torch.empty(members, fan_in, fan_out).uniform_(-bound, bound)
            )
            self.bias = nn.Parameter(torch.zeros(members, 1, fan_out))

        def forward(self, x):
            return torch.baddbmm(self.bias, x, self.weight)

    class Ensemble(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            sizes = (inputs, *config.hidden_sizes)
            members = config.ensemble_size
            self.hidden = nn.ModuleList(
                EnsembleLinear(members, a, b) for a, b in itertools.pairwise(sizes)
            )
            self.head = EnsembleLinear(members, sizes[-1], 2 * outputs + 1)
            self.max_log_var = nn.Parameter(torch.full((1, 1, outputs), 0.5))
            self.min_log_var = nn.Parameter(torch.full((1, 1, outputs), -10.0))
            self.outputs = outputs

        def forward(self, x):
            for layer in self.hidden:
                x = nn.functional.silu(layer(x))
            out = self.head(x)
            mean, raw, logit = out.split([self.outputs, self.outputs, 1], dim=-1)
            log_var = self.max_log_var - nn.functional.softplus(self.max_log_var - raw)
            log_var = self.min_log_var + nn.functional.softplus(log_var - self.min_log_var)
            return mean, log_var, logit

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return Ensemble().to(config.device)


class TorchDynamicsAdapter:
    """A user's own torch world model (image, video or state) as a dynamics world model.

    ``module(observations, actions)`` receives tensors with a leading batch dimension
    (observations keep their dtype, e.g. ``uint8`` images ``(N, H, W, C)``; actions are float32)
    and returns ``(next_observations, rewards)`` or ``(next_observations, rewards,
    termination_logits)``, or a dict with keys ``next_observations``, ``rewards`` and
    optionally ``termination_logits`` and ``std``. The adapter runs it in eval mode without
    gradients, in chunks of ``batch_size``, and casts next observations back to the input
    dtype (rounding and clipping for integer images).

    Example:
        >>> import torch
        >>> class Drift(torch.nn.Module):
        ...     def forward(self, obs, act):
        ...         return obs + act.sum(-1, keepdim=True), obs.sum(-1)
        >>> adapter = TorchDynamicsAdapter(Drift())
        >>> step = adapter.predict_step(np.zeros((2, 3), np.float32), np.ones((2, 1)))
        >>> step.next_observations.tolist(), step.terminations.tolist()
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [False, False])
    """

    def __init__(
        self,
        module: Any,
        device: str = "cpu",
        batch_size: int | None = None,
        termination_threshold: float = 0.5,
    ) -> None:
        self.torch = require("torch", "TorchDynamicsAdapter")
        if not isinstance(module, self.torch.nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        if batch_size is not None and batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.module = module.to(device)
        self.device, self.batch_size = device, batch_size
        self.termination_threshold = termination_threshold

    def _run(self, observations: np.ndarray, actions: np.ndarray) -> dict[str, np.ndarray]:
        torch = self.torch
        out = self.module(
            torch.as_tensor(observations, device=self.device),
            torch.as_tensor(actions, dtype=torch.float32, device=self.device),
        )
        if isinstance(out, dict):
            parts = {
                k: out[k]
                for k in ("next_observations", "rewards", "termination_logits", "std")
                if k in out
            }
        elif isinstance(out, Sequence) and len(out) in (2, 3):
            parts = dict(
                zip(("next_observations", "rewards", "termination_logits"), out, strict=False)
            )
        else:
            raise TypeError(
                "the world model must return (next_observations, rewards[, termination_logits]) "
                "or a dict with those keys"
            )
        return {k: v.detach().to("cpu").numpy() for k, v in parts.items()}

    def predict_step(self, observations: np.ndarray, actions: np.ndarray) -> StepPrediction:
        obs = np.asarray(observations)
        act = np.asarray(actions, dtype=np.float32)
        if len(obs) != len(act):
            raise ValueError(f"{len(obs)} observations but {len(act)} actions")
        size = self.batch_size or max(len(obs), 1)
        was_training = self.module.training
        self.module.eval()
        try:
            with self.torch.inference_mode():
                chunks = [
                    self._run(obs[i : i + size], act[i : i + size])
                    for i in range(0, len(obs), size)
                ]
        finally:
            self.module.train(was_training)
        joined = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]} if chunks else {}
        next_obs = joined.get("next_observations", np.empty((0, *obs.shape[1:])))
        if np.issubdtype(obs.dtype, np.integer):
            info = np.iinfo(obs.dtype)
            next_obs = np.clip(np.rint(next_obs), info.min, info.max)
        next_obs = next_obs.astype(obs.dtype, copy=False)
        rewards = np.asarray(joined.get("rewards", np.empty(0)), dtype=np.float64).reshape(len(obs))
        logits = joined.get("termination_logits")
        terminations = (
            np.zeros(len(obs), dtype=bool)
            if logits is None
            else 1 / (1 + np.exp(-np.asarray(logits, np.float64).reshape(len(obs))))
            > self.termination_threshold
        )
        std = joined.get("std")
        return StepPrediction(
            next_observations=next_obs,
            rewards=rewards,
            terminations=terminations,
            std=None if std is None else np.asarray(std, np.float64).reshape(len(obs)),
        )
