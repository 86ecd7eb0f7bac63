"""Overhead of ``WorldModelVectorEnv`` against a raw ``gymnasium.vector.SyncVectorEnv``.

All run the same trivial one-step env (a context drawn at reset, a reward computed in
``step``) at 256 envs; the wrapper adds a trivial vectorised world model, 32 groups of 8, the
default ``RewardFusion("wmrl")`` (10 % anchor groups, isotonic refit every round) and the
inline executor. One round is ``reset()`` + ``step()``; rounds alternate between the
contenders so that machine noise hits all alike. Contenders:

* ``raw``: ``SyncVectorEnv``, unseeded resets (no group invariant at all);
* ``raw, seeded groups``: ``SyncVectorEnv`` reset with one seed per group of 8, which is
  what gives a raw vector env the group invariant the wrapper provides (gymnasium's seeded
  reset re-creates the env's generator, ~25 us);
* ``wrapper``: ``WorldModelVectorEnv``.

With ``--step-ms`` every real ``step`` also sleeps that long, standing in for a real env.
The wrapper steps only the anchor groups, so its advantage grows with the env's cost.

    python benchmarks/bench_wrapper.py [--envs 256] [--group-size 8] [--rounds 300]
        [--step-ms 0]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

from wmrl_env import RewardFusion, WorldModelVectorEnv

CONTEXTS, ACTIONS = 16, 8


class TrivialTask(gym.Env):
    """Context ``c`` at reset; ``step(a)`` scores ``a`` against ``c`` and ends the episode."""

    observation_space = gym.spaces.Discrete(CONTEXTS)
    action_space = gym.spaces.Discrete(ACTIONS)
    step_seconds = 0.0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.context = int(self.np_random.integers(CONTEXTS))
        return self.context, {}

    def step(self, action: int):
        if self.step_seconds:
            time.sleep(self.step_seconds)
        reward = float((self.context * 3 + int(action)) % ACTIONS) / ACTIONS
        return self.context, reward, True, False, {}


class TrivialWorldModel:
    """The task's reward with a monotone distortion, computed for the whole batch at once."""

    def predict(self, contexts, actions) -> np.ndarray:
        c, a = np.asarray(contexts), np.asarray(actions)
        return (((c * 3 + a) % ACTIONS) / ACTIONS) ** 2 + 0.1


def time_round(envs: gym.vector.VectorEnv, actions: np.ndarray, seed: list | None = None) -> float:
    start = time.perf_counter()
    envs.reset(seed=seed)
    envs.step(actions)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--step-ms", type=float, default=0.0)
    args = parser.parse_args()
    TrivialTask.step_seconds = args.step_ms / 1e3
    num_groups = args.envs // args.group_size

    raw = gym.vector.SyncVectorEnv([TrivialTask] * args.envs)
    wrapped = WorldModelVectorEnv(
        TrivialTask,
        TrivialWorldModel(),
        num_groups=num_groups,
        group_size=args.group_size,
        fusion=RewardFusion(method="wmrl", seed=0),
        executor="inline",
    )
    raw.reset(seed=0)
    wrapped.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(ACTIONS, size=wrapped.num_envs)
    times: dict[str, list[float]] = {"raw": [], "raw, seeded groups": [], "wrapper": []}
    for round_ in range(args.warmup + args.rounds):
        group_seeds = np.repeat(rng.integers(2**31 - 1, size=num_groups), args.group_size)
        measured = {
            "raw": time_round(raw, actions),
            "raw, seeded groups": time_round(raw, actions, [int(s) for s in group_seeds]),
            "wrapper": time_round(wrapped, actions),
        }
        if round_ >= args.warmup:
            for name, seconds in measured.items():
                times[name].append(seconds)
    raw.close()
    wrapped.close()
    median = {name: 1e3 * float(np.median(values)) for name, values in times.items()}
    print(
        f"{wrapped.num_envs} envs ({num_groups} groups of {args.group_size}), step "
        f"{args.step_ms} ms, {args.rounds} rounds of reset()+step(), medians:"
    )
    for name, ms in median.items():
        print(f"  {name:<20} {ms:8.2f} ms   wrapper / this = {median['wrapper'] / ms:6.3f}")


if __name__ == "__main__":
    main()
