"""The robot bench's reference lines on its own held-out starts: the oracle, the untrained
policy and plain search (docs/benchmarks.md, "The robot bench's ceiling").

For a ``wmrl bench --domain robosuite`` folder, on the same held-out starts its arms are
scored on:

* **oracle**: the task's scripted expert without noise (the demonstrator the policy is cloned
  from plays with noise and pushes; this is its best);
* **untrained**: each seed's behaviour-cloned start, greedy (must equal the folder's
  ``start_success``: checked, the run stops if not);
* **plain search**: each seed's start policy's sampled chunks (GRPO's exploration noise),
  ``--tries`` episodes from every start with fresh noise; pass@k = share of starts solved by
  one of the first k tries.

Writes ``references.json`` into the folder (``wmrl bench --domain robosuite --report-only``
then adds the lines to ``results.md``) and prints them. Resumable per seed.

    nice -n 10 python benchmarks/robot_references.py docs/figures/robot_bench_full/40seeds \\
        --seeds 0 1 2 3 --tries 4
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NOISE_SEED_STRIDE = 1_000_003  # try j of start s draws its noise from s + j * stride


def _config(folder: Path):
    from wmrl_env.bench.robotics.config import RobotBenchConfig

    paths = sorted(folder.glob("config-seed*.json"))
    if not paths:
        raise SystemExit(f"{folder} holds no config-seed*.json: not a robot-bench folder")
    return RobotBenchConfig(**json.loads(paths[0].read_text()))


def oracle(task: str, seeds: list[int], horizon: int) -> list[bool]:
    """The noise-free scripted expert from each start (``collect_demonstrations``)."""
    from wmrl_env.robotics.demonstrations import collect_demonstrations

    demos = collect_demonstrations(f"wmrl/{task}-v0", len(seeds), seed=seeds[0], horizon=horizon)
    return [bool(x) for x in demos.episode_success]


def search(config, seed: int, starts: list[int], tries: int, horizon: int) -> dict:
    """The seed's start policy: greedy once, sampled ``tries`` times, from every start."""
    from wmrl_env.bench.robotics.evaluation import StepCounter
    from wmrl_env.bench.robotics.report import pass_at
    from wmrl_env.bench.robotics.start import base_policy
    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.robotics import success_on_seeds

    policy = base_policy(config, seed)[0]
    env = StepCounter(
        RobosuiteEnv(config.task, horizon=horizon, reward_shaping=False, terminate_on_success=True)
    )
    try:
        greedy = success_on_seeds(policy, env, starts)
        env.steps = 0
        outcomes = [
            success_on_seeds(
                policy, env, starts, sampled=True,
                noise_seeds=[s + j * NOISE_SEED_STRIDE for s in starts],
            ).tolist()
            for j in range(tries)
        ]  # fmt: skip
    finally:
        env.close()
    return {
        "seed": seed,
        "greedy": float(greedy.mean()),
        "pass_at": pass_at(outcomes),
        "tries": outcomes,
        "steps": env.steps,
        "episodes": tries * len(starts),
    }


def main(argv: list[str] | None = None) -> None:
    from wmrl_env.bench.robotics import _read_lines
    from wmrl_env.bench.robotics.report import references_markdown
    from wmrl_env.bench.robotics.start import base_policy
    from wmrl_env.robotics import HELD_OUT_SEED

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--seeds", type=int, nargs="*", help="default: every seed of the folder")
    parser.add_argument("--tries", type=int, default=4)
    args = parser.parse_args(argv)
    if args.tries < 1:
        parser.error(f"--tries must be at least 1, got {args.tries}")

    config = _config(args.folder)
    seeds_done = {row["seed"]: row for row in _read_lines(args.folder / "seeds.jsonl")}
    seeds = args.seeds if args.seeds else sorted(seeds_done)
    if not seeds:
        raise SystemExit(f"{args.folder}/seeds.jsonl holds no seed: give --seeds")
    starts = [HELD_OUT_SEED + i for i in range(config.eval_starts)]
    path = args.folder / "references.json"
    references = json.loads(path.read_text()) if path.exists() else {}
    if references and (references["eval_starts"], references["tries"]) != (len(starts), args.tries):
        raise SystemExit(f"{path} holds another set-up: remove it to start again")
    horizon = int(base_policy(config, seeds[0])[1].metadata["horizon"])
    if not references:
        outcomes = oracle(config.task, starts, horizon)
        references = {
            "task": config.task, "eval_starts": len(starts), "horizon": horizon,
            "tries": args.tries, "oracle": {"success": sum(outcomes) / len(outcomes),
                                            "outcomes": outcomes},
            "search": [],
        }  # fmt: skip
    done = {row["seed"] for row in references["search"]}
    for seed in (s for s in seeds if s not in done):
        row = search(config, seed, starts, args.tries, horizon)
        recorded = seeds_done.get(seed, {}).get("start_success")
        if recorded is not None and abs(recorded - row["greedy"]) > 1e-12:
            raise SystemExit(f"seed {seed}: greedy start {row['greedy']} != recorded {recorded}")
        references["search"].append(row)
        path.write_text(json.dumps(references) + "\n")  # resumable: a finished seed is kept
        print(f"seed {seed}: greedy {row['greedy']:.3f}, pass@k {row['pass_at']}", flush=True)
    print(references_markdown(references))


if __name__ == "__main__":
    main()
