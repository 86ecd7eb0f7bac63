"""CPU time of one robosuite control step: robosuite's own controller path against
:class:`~wmrl_env.envs.robosuite.fast_control.FastControl`, in one process, same actions.

Two envs of the task (``fast_control=False`` and ``True``) play the same random episodes in
alternating blocks of steps (so load changes hit both alike); every step's observation is
compared (the paths are bit-identical, and the run stops if they are not). Prints one JSON line
with the CPU ms per step of each path and their ratio.

    nice -n 10 .venv/bin/python benchmarks/robosuite_step_cost.py --task Lift --steps 2000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Lift")
    parser.add_argument("--steps", type=int, default=2000, help="steps per path")
    parser.add_argument("--block", type=int, default=50, help="steps per turn of each path")
    parser.add_argument("--horizon", type=int, default=200)
    args = parser.parse_args(argv)

    from wmrl_env.envs.robosuite import RobosuiteEnv

    envs = {
        "robosuite": RobosuiteEnv(args.task, horizon=args.horizon, fast_control=False),
        "fast": RobosuiteEnv(args.task, horizon=args.horizon, fast_control=True),
    }
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (args.steps, 7)).astype(np.float32)
    seconds = dict.fromkeys(envs, 0.0)
    observations: dict[str, list[np.ndarray]] = {name: [] for name in envs}
    episode = dict.fromkeys(envs, 0)
    for env in envs.values():
        env.reset(seed=0)
    for start in range(0, args.steps, args.block):
        for name, env in envs.items():
            began = time.process_time()
            for action in actions[start : start + args.block]:
                observation, _, terminated, truncated, _ = env.step(action)
                observations[name].append(observation)
                if terminated or truncated:
                    episode[name] += 1
                    env.reset(seed=episode[name])
            seconds[name] += time.process_time() - began
        for a, b in zip(*observations.values(), strict=True):
            if not np.array_equal(a, b):
                raise SystemExit("the two paths differ: FastControl is not bit-identical here")
        observations = {name: [] for name in envs}
    for env in envs.values():
        env.close()
    per_step = {name: 1000 * s / args.steps for name, s in seconds.items()}
    print(
        json.dumps(
            {
                "task": args.task,
                "steps": args.steps,
                "cpu_ms_per_step": {k: round(v, 3) for k, v in per_step.items()},
                "robosuite_over_fast": round(per_step["robosuite"] / per_step["fast"], 2),
                "identical": True,
            }
        )
    )


if __name__ == "__main__":
    main()
