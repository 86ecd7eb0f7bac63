"""How fast the replay env answers, and how much real execution it stands for.

Runs N one-step episodes of ``wmrl/MLTaskReplay-v0`` with random structured actions and
reports episodes per second and the recorded sandbox seconds those episodes replayed.

    python benchmarks/ml_tasks_replay.py --episodes 20000 --seed 0
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import gymnasium as gym

import wmrl_env.envs.ml_tasks  # noqa: F401  (registers the environments)


@dataclass
class Args:
    episodes: int = 20000
    seed: int = 0


def main(args: Args) -> dict[str, float]:
    env = gym.make("wmrl/MLTaskReplay-v0", tasks="all")
    env.action_space.seed(args.seed)
    env.reset(seed=args.seed)
    charged, failures = 0.0, 0
    start = time.perf_counter()
    for episode in range(args.episodes):
        env.reset(seed=args.seed + episode)
        _, _, _, _, info = env.step(env.action_space.sample())
        charged += info["exec_seconds"]
        failures += info["status"] != "ok"
    wall = time.perf_counter() - start
    env.close()
    return {
        "episodes": args.episodes,
        "wall_seconds": wall,
        "episodes_per_second": args.episodes / wall,
        "replayed_sandbox_seconds": charged,
        "speedup": charged / wall,
        "failure_share": failures / args.episodes,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=Args.episodes)
    parser.add_argument("--seed", type=int, default=Args.seed)
    for key, value in main(Args(**vars(parser.parse_args()))).items():
        print(f"{key}: {value:.4g}")
