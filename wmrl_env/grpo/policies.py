"""Torch policies for the GRPO loop: categorical (Discrete / MultiDiscrete) and Gaussian (Box).

Any object with ``act(observations) -> (actions, log_probs)``, ``log_prob(observations,
actions) -> log_probs`` and ``parameters()`` is a policy for :func:`wmrl_env.grpo.train`
(the :class:`Policy` protocol): plug in a transformer that writes programs the same way.
Observations arrive batched as the vector env returns them; ``encode`` turns them into a
float tensor ``(N, features)`` (defaults per observation space: one-hot for ``Discrete`` and
``MultiDiscrete``, flattened for ``Box``; ``Text`` needs your own).

Sampling uses each policy's own ``torch.Generator`` (seeded by ``seed``): no global RNG.

Example:
    >>> import numpy as np
    >>> from gymnasium import spaces
    >>> policy = make_policy(spaces.Discrete(3), spaces.Discrete(4), seed=0)
    >>> actions, log_probs = policy.act(np.array([0, 2]))
    >>> actions.shape, log_probs.shape
    ((2,), torch.Size([2]))
    >>> bool(torch.allclose(policy.log_prob(np.array([0, 2]), actions), log_probs))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces

from wmrl_env.utils.imports import require

torch = require("torch", "wmrl_env.grpo")
nn = torch.nn

__all__ = ["CategoricalPolicy", "GaussianPolicy", "Policy", "make_encoder", "make_policy"]

Encoder = Callable[[Any], "torch.Tensor"]


@runtime_checkable
class Policy(Protocol):
    """What the GRPO loop needs from a policy."""

    def act(self, observations: Any) -> tuple[np.ndarray, torch.Tensor]:
        """Sample one action per observation; return them (as the env takes them) and their
        log-probabilities (a tensor without gradient)."""
        ...

    def log_prob(self, observations: Any, actions: np.ndarray) -> torch.Tensor:
        """Log-probabilities of ``actions`` under the current parameters (with gradient)."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...


def make_encoder(space: spaces.Space) -> tuple[Encoder, int]:
    """A default observation encoder for ``space`` and its feature size."""
    if isinstance(space, spaces.Discrete):
        n, start = int(space.n), int(space.start)
        return lambda obs: _one_hot(np.asarray(obs) - start, [n]), n
    if isinstance(space, spaces.MultiDiscrete):
        nvec = [int(n) for n in np.ravel(space.nvec)]
        return lambda obs: _one_hot(np.asarray(obs).reshape(len(obs), -1), nvec), sum(nvec)
    if isinstance(space, spaces.Box):
        size = int(np.prod(space.shape))
        return lambda obs: torch.as_tensor(np.asarray(obs, np.float32).reshape(-1, size)), size
    raise TypeError(
        f"no default encoder for {space}: pass encode=... (observations -> float tensor)"
    )


def _one_hot(values: np.ndarray, nvec: Sequence[int]) -> torch.Tensor:
    values = torch.as_tensor(values.reshape(values.shape[0], -1), dtype=torch.long)
    parts = [nn.functional.one_hot(values[:, j], n) for j, n in enumerate(nvec)]
    return torch.cat(parts, dim=1).float()


def _mlp(inputs: int, outputs: int, hidden: int) -> nn.Module:
    if hidden == 0:
        return nn.Linear(inputs, outputs)
    return nn.Sequential(
        nn.Linear(inputs, hidden),
        nn.Tanh(),
        nn.Linear(hidden, hidden),
        nn.Tanh(),
        nn.Linear(hidden, outputs),
    )


class CategoricalPolicy(nn.Module):
    """Independent categorical heads, one per action dimension (``nvec``).

    Args:
        features: size of the encoded observation.
        nvec: choices per action dimension; ``[n]`` for a ``Discrete(n)`` action.
        encode: observations -> float tensor ``(N, features)``.
        hidden: MLP width; 0 for a linear (softmax) policy.
        discrete: return actions of shape ``(N,)`` (a ``Discrete`` space) instead of ``(N, k)``.
        seed: seeds the initial weights and the sampling generator.
    """

    def __init__(
        self,
        features: int,
        nvec: Sequence[int],
        encode: Encoder,
        hidden: int = 64,
        discrete: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.nvec = [int(n) for n in nvec]
        if discrete and len(self.nvec) != 1:
            raise ValueError("discrete=True needs exactly one action dimension")
        self.encode, self.discrete = encode, discrete
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net = _mlp(features, sum(self.nvec), hidden)
        self.generator = torch.Generator().manual_seed(seed)

    def _logits(self, observations: Any) -> list[torch.Tensor]:
        return list(torch.split(self.net(self.encode(observations)), self.nvec, dim=1))

    def act(self, observations: Any) -> tuple[np.ndarray, torch.Tensor]:
        with torch.no_grad():
            logits = self._logits(observations)
            picks = [
                torch.multinomial(torch.softmax(lg, dim=1), 1, generator=self.generator)[:, 0]
                for lg in logits
            ]
            actions = torch.stack(picks, dim=1)
            log_probs = self._log_prob(logits, actions)
        out = actions.numpy()
        return (out[:, 0] if self.discrete else out), log_probs

    def log_prob(self, observations: Any, actions: np.ndarray) -> torch.Tensor:
        actions = torch.as_tensor(np.asarray(actions), dtype=torch.long).reshape(-1, len(self.nvec))
        return self._log_prob(self._logits(observations), actions)

    def entropy(self, observations: Any) -> torch.Tensor:
        logits = self._logits(observations)
        return sum(torch.distributions.Categorical(logits=lg).entropy() for lg in logits)

    @staticmethod
    def _log_prob(logits: list[torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        per_dim = [
            torch.log_softmax(lg, dim=1).gather(1, actions[:, j : j + 1])[:, 0]
            for j, lg in enumerate(logits)
        ]
        return torch.stack(per_dim, dim=1).sum(dim=1)


class GaussianPolicy(nn.Module):
    """A diagonal Gaussian over a ``Box`` action, with a state-independent log std.

    Actions are returned unclipped (their log-probabilities must match); the GRPO loop clips
    them to the action space before the env sees them, like CleanRL's ``ClipAction``.
    """

    def __init__(
        self,
        features: int,
        action_shape: Sequence[int],
        encode: Encoder,
        hidden: int = 64,
        log_std_init: float = -0.5,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.action_shape = tuple(int(s) for s in action_shape)
        size = int(np.prod(self.action_shape))
        self.encode = encode
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.mean = _mlp(features, size, hidden)
        self.log_std = nn.Parameter(torch.full((size,), float(log_std_init)))
        self.generator = torch.Generator().manual_seed(seed)

    def _distribution(self, observations: Any) -> torch.distributions.Normal:
        return torch.distributions.Normal(self.mean(self.encode(observations)), self.log_std.exp())

    def act(self, observations: Any) -> tuple[np.ndarray, torch.Tensor]:
        with torch.no_grad():
            dist = self._distribution(observations)
            noise = torch.randn(dist.loc.shape, generator=self.generator)
            actions = dist.loc + dist.scale * noise
            log_probs = dist.log_prob(actions).sum(dim=1)
        return actions.numpy().reshape(-1, *self.action_shape), log_probs

    def log_prob(self, observations: Any, actions: np.ndarray) -> torch.Tensor:
        dist = self._distribution(observations)
        flat = torch.as_tensor(np.asarray(actions, np.float32)).reshape(dist.loc.shape)
        return dist.log_prob(flat).sum(dim=1)

    def entropy(self, observations: Any) -> torch.Tensor:
        return self._distribution(observations).entropy().sum(dim=1)


def make_policy(
    observation_space: spaces.Space,
    action_space: spaces.Space,
    hidden: int = 64,
    encode: Encoder | None = None,
    features: int | None = None,
    seed: int = 0,
) -> CategoricalPolicy | GaussianPolicy:
    """A policy for single-env spaces: categorical for Discrete/MultiDiscrete, Gaussian for Box."""
    if encode is None:
        encode, features = make_encoder(observation_space)
    elif features is None:
        raise ValueError("give features= (the encoded size) with a custom encode")
    if isinstance(action_space, spaces.Discrete):
        if int(action_space.start) != 0:
            raise ValueError("Discrete action spaces must start at 0")
        return CategoricalPolicy(features, [int(action_space.n)], encode, hidden, True, seed)
    if isinstance(action_space, spaces.MultiDiscrete):
        if np.any(action_space.start != 0):
            raise ValueError("MultiDiscrete action spaces must start at 0")
        nvec = [int(n) for n in np.ravel(action_space.nvec)]
        return CategoricalPolicy(features, nvec, encode, hidden, False, seed)
    if isinstance(action_space, spaces.Box):
        return GaussianPolicy(features, action_space.shape, encode, hidden, seed=seed)
    raise TypeError(f"no default policy for action space {action_space}: write one (see Policy)")
