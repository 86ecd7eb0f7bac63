"""The behaviour-cloned code policy's programs, executed: parse / run / score shares, diversity.

Samples ``--samples`` programs per task (temperature 1) from ``make_code_policy(seed)``,
runs every one for real (replayed from the execution table when it is a grid program, live
in the warm local sandbox otherwise) and prints one summary per task and overall.

    python benchmarks/code_policy_bc.py --seed 0 --samples 100
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

DEFAULT_TASKS = "diabetes,wooldridge_beauty,daag_antigua,aer_teachingratings,wine,engel"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--tasks", default=DEFAULT_TASKS)
    parser.add_argument("--cache-dir", default="runs/code_policy")
    parser.add_argument("--out", default="runs/code_policy_bc.json")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from wmrl_env.code_policy import (
        ReplayOrLiveExecutor,
        ScoreProgramFailures,
        execute_programs,
        make_code_policy,
        sample_programs,
        summarise,
        task_prompt,
    )
    from wmrl_env.envs.ml_tasks import load_table
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox

    torch.set_num_threads(1)
    tasks = args.tasks.split(",")
    path = make_code_policy(args.seed, args.cache_dir)
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    start = time.perf_counter()
    programs = sample_programs(model, tokenizer, [task_prompt(t) for t in tasks], args.samples)
    sampling_seconds = time.perf_counter() - start
    executor = ScoreProgramFailures(
        ReplayOrLiveExecutor(load_table().replay_executor(), default_sandbox(2, warm=True))
    )
    with executor:
        outcomes = execute_programs(
            [t for t in tasks for _ in range(args.samples)],
            [p for group in programs for p in group],
            executor,
        )
    report = {
        "policy": str(path),
        "bc_log": json.loads((path / "bc_log.json").read_text()),
        "samples_per_task": args.samples,
        "sampling_seconds": sampling_seconds,
        "overall": summarise(outcomes),
        "per_task": {t: summarise([o for o in outcomes if o.task_id == t]) for t in tasks},
        "statuses": {s: sum(o.status == s for o in outcomes) for s in {o.status for o in outcomes}},
        "load_average": os.getloadavg(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("overall", "statuses", "load_average")}, indent=2))


if __name__ == "__main__":
    main()
