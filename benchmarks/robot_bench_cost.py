"""Where one seed of ``wmrl bench --domain robosuite`` spends its time, and what a real
simulator step of training costs in all (docs/benchmarks.md, "Cost").

Runs the bench on one seed into a fresh folder and times, by wrapping the functions that do
the work: simulator steps (training and evaluation apart), env builds, closes, resets and
snapshots, world-model pretraining and refits, imagined steps, policy updates and the rest.
Each phase counts its own time (time in a nested phase is that phase's); real envs step in a
worker thread while the main thread waits or imagines, so phases can overlap a little. Prints
one JSON line: wall and CPU seconds (this process, all threads), training real steps,
evaluation steps, cost per training step, phases. Runs against whichever ``wmrl_env`` is on
the path (``PYTHONPATH=<checkout>``): the before/after comparison runs two checkouts at once,
under the same load.

    nice -n 10 env PYTHONPATH=. python benchmarks/robot_bench_cost.py --iterations 2 \\
        --out /tmp/cost-after
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import threading
import time
from collections import defaultdict
from pathlib import Path

PHASES: dict[str, list[tuple[str, str, str]]] = {
    # phase: (module, class or "", function)
    "seed start (base policy, predictor AUC)": [
        ("wmrl_env.bench.robotics.start", "", "prepare_seed")
    ],
    "evaluation (held-out starts)": [
        ("wmrl_env.bench.robotics.evaluation", "Evaluator", "success")
    ],
    "world-model pretraining": [("wmrl_env.bench.robotics.start", "SeedStart", "world_model")],
    "world-model refits": [("wmrl_env.bench.robotics.world_model", "SuccessWorldModel", "refit")],
    "imagined steps": [
        ("wmrl_env.bench.robotics.world_model", "SuccessWorldModel", "predict_step"),
        ("wmrl_env.bench.robotics.world_model", "RandomWorldModel", "predict_step"),
    ],
    "policy updates": [("wmrl_env.grpo.loop", "", "grpo_loss")],
    "simulator steps": [("wmrl_env.envs.robosuite.env", "RobosuiteEnv", "step")],
    "env builds": [("wmrl_env.envs.robosuite.env", "RobosuiteEnv", "__init__")],
    "env closes": [("wmrl_env.envs.robosuite.env", "RobosuiteEnv", "close")],
    "resets and snapshots": [
        ("wmrl_env.envs.robosuite.env", "RobosuiteEnv", "reset"),
        ("wmrl_env.envs.robosuite.env", "RobosuiteEnv", "get_snapshot"),
        ("wmrl_env.envs.robosuite.env", "RobosuiteEnv", "restore_snapshot"),
    ],
}


class PhaseTimer:
    """Self time per phase (a nested phase's time is taken out of its parent), per thread."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._local = threading.local()
        self._lock = threading.Lock()

    def wrap(self, phase: str, function):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - began
                inner = stack.pop()
                if stack:
                    stack[-1] += elapsed
                with self._lock:
                    self.seconds[phase] += elapsed - inner
                    self.calls[phase] += 1

        return timed

    def install(self) -> None:
        import importlib

        for phase, targets in PHASES.items():
            for module_name, owner, name in targets:
                module = importlib.import_module(module_name)
                holder = getattr(module, owner) if owner else module
                setattr(holder, name, self.wrap(phase, getattr(holder, name)))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--eval-starts", type=int, default=12)
    parser.add_argument("--cache-dir", default="runs/base_policy")
    parser.add_argument("--out", required=True)
    parser.add_argument("--set", nargs="*", default=[], help="config overrides key=json")
    args = parser.parse_args(argv)

    import torch

    import wmrl_env
    from wmrl_env.bench.robotics import RobotBenchConfig, run_robot_bench
    from wmrl_env.bench.robotics.start import base_policy

    torch.set_num_threads(1)
    overrides = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    config = RobotBenchConfig.full(
        seeds=1, first_seed=args.seed, iterations=args.iterations, eval_every=args.eval_every,
        eval_starts=args.eval_starts, cache_dir=args.cache_dir, out=args.out, **overrides,
    )  # fmt: skip
    base_policy(config, args.seed)  # build the cached base policy outside the timing
    if Path(args.out).exists():
        raise SystemExit(f"{args.out} exists: the timing needs a fresh folder")
    timer = PhaseTimer()
    timer.install()
    cpu, wall = cpu_seconds(), time.perf_counter()
    run_robot_bench(config)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    runs = [json.loads(line) for line in (Path(args.out) / "runs.jsonl").read_text().splitlines()]
    seeds = [json.loads(line) for line in (Path(args.out) / "seeds.jsonl").read_text().splitlines()]
    train_steps = sum(run["steps"][-1]["real_steps"] for run in runs)
    eval_steps = sum(run["steps"][-1]["eval_steps"] for run in runs) + sum(
        s["start_eval_steps"] for s in seeds
    )
    phases = {k: round(v, 2) for k, v in sorted(timer.seconds.items(), key=lambda kv: -kv[1])}
    print(
        json.dumps(
            {
                "code": str(Path(wmrl_env.__file__).parent.parent),
                "wall_s": round(wall, 1),
                "cpu_s": round(cpu, 1),
                "train_real_steps": train_steps,
                "eval_steps": eval_steps,
                "cpu_ms_per_train_step": round(1000 * cpu / train_steps, 2),
                "wall_ms_per_train_step": round(1000 * wall / train_steps, 2),
                "phases_s": phases,
                "calls": dict(timer.calls),
                "finals": {run["arm"]: run["steps"][-1]["true_score"] for run in runs},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
