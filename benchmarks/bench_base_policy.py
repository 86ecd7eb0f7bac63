"""Success of the scripted experts and of the behaviour-cloned base policies.

    python benchmarks/bench_base_policy.py expert --task Lift --episodes 50
    python benchmarks/bench_base_policy.py bc --task Lift --eval-episodes 50 [--set epochs=50]

``expert`` plays the clean (or ``--noise``) expert on held-out starts; ``bc`` times
``make_base_policy`` (collect + train, no cache) and measures its greedy and sampled success
on held-out starts (seeds from ``HELD_OUT_SEED``). One JSON line per run, on stdout and
appended to ``--log``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np

import wmrl_env.envs.robosuite  # noqa: F401  (registers the ids)
from wmrl_env.envs.robosuite.experts import make_expert
from wmrl_env.robotics import HELD_OUT_SEED, RECIPES, make_base_policy, success_on_seeds


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of a binomial proportion."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return round(centre - half, 3), round(centre + half, 3)


def rate(outcomes: np.ndarray) -> dict[str, Any]:
    wins = int(outcomes.sum())
    return {"rate": wins / len(outcomes), "ci95": wilson(wins, len(outcomes)), "n": len(outcomes)}


def expert_run(args: argparse.Namespace) -> dict[str, Any]:
    horizon = args.horizon or RECIPES[args.task].horizon
    env = gym.make(f"wmrl/{args.task}-v0", horizon=horizon, terminate_on_success=True)
    expert = make_expert(args.task, noise=args.noise, perturb_prob=args.perturb_prob)
    outcomes, steps, start = [], 0, time.perf_counter()
    for seed in range(HELD_OUT_SEED, HELD_OUT_SEED + args.episodes):
        observation, info = env.reset(seed=seed)
        expert.reset(seed=seed)
        over = False
        while not over:
            observation, _, terminated, truncated, info = env.step(expert(observation))
            steps, over = steps + 1, terminated or truncated
        outcomes.append(info["success"])
    seconds = time.perf_counter() - start
    return {"horizon": horizon, **rate(np.asarray(outcomes)), "steps_per_s": steps / seconds}


def bc_run(args: argparse.Namespace) -> dict[str, Any]:
    overrides = {key: json.loads(value) for key, value in (s.split("=", 1) for s in args.set)}
    start = time.perf_counter()
    policy, demos = make_base_policy(args.task, seed=args.seed, **overrides)
    build_s = time.perf_counter() - start
    recipe = demos.metadata["recipe"]
    env = gym.make(f"wmrl/{args.task}-v0", horizon=recipe["horizon"], terminate_on_success=True)
    seeds = range(HELD_OUT_SEED, HELD_OUT_SEED + args.eval_episodes)
    greedy = success_on_seeds(policy, env, seeds)
    sampled = success_on_seeds(policy, env, seeds, sampled=True)
    return {
        "overrides": overrides,
        "demo_episodes": demos.num_episodes,
        "demo_success": float(demos.episode_success.mean()),
        "demo_steps": demos.num_steps,
        "build_s": round(build_s, 1),
        "greedy": rate(greedy),
        "sampled": rate(sampled),
        "eval_s": round(time.perf_counter() - start - build_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["expert", "bc"])
    parser.add_argument("--task", default="Lift", choices=sorted(RECIPES))
    parser.add_argument("--episodes", type=int, default=50, help="expert: episodes")
    parser.add_argument("--noise", type=float, default=0.0, help="expert: noise std")
    parser.add_argument("--perturb-prob", type=float, default=0.0, help="expert: push chance")
    parser.add_argument("--horizon", type=int, default=None, help="expert: default the recipe's")
    parser.add_argument("--seed", type=int, default=0, help="bc: make_base_policy's seed")
    parser.add_argument("--eval-episodes", type=int, default=50, help="bc: held-out episodes")
    parser.add_argument("--set", nargs="*", default=[], help="bc: recipe overrides key=json")
    parser.add_argument("--log", default="runs/base_policy.jsonl")
    args = parser.parse_args()
    result = expert_run(args) if args.what == "expert" else bc_run(args)
    record = {
        "what": args.what,
        "task": args.task,
        "seed": args.seed,
        "noise": args.noise,
        "perturb_prob": args.perturb_prob,
        **result,
        "load": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(record), flush=True)
    os.makedirs(os.path.dirname(args.log) or ".", exist_ok=True)
    with open(args.log, "a") as stream:
        stream.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
