"""The transfer check for multi-turn ML agents: train in simulation, score for real.

``--policy tabular`` (default) trains a :class:`~wmrl_env.bench.revision_policy.RevisionPolicy`
per arm (``real``, ``anchors``, ``wmrl``, ``wm``) and seed on the ``train`` tasks through
``WorldModelVectorEnv`` with the default ML world model's simulated turns, then scores it on
the real multi-turn env and in simulation on the ``heldout`` tasks
(:mod:`wmrl_env.bench.multiturn`). ``--policy lm`` does the same with the code LM as the
reviser: one behaviour-cloned start (:func:`~wmrl_env.code_policy.lm_reviser.make_lm_reviser`,
cached under ``--cache-dir``), GRPO over episodes per arm and seed, and its behaviour (stops,
repeats, runs after a failure) under real and simulated feedback
(:mod:`wmrl_env.bench.multiturn_lm`); its programs replay the execution table where it holds
them and run live in the local sandbox otherwise. Each finished run is appended to
``<out>/runs.jsonl``, stamped with what it was made with
(:func:`~wmrl_env.bench.multiturn.transfer_fingerprint`: the config apart from arms and
seeds, the package version, the world model's files and the cloned LM's): run the same
command again to resume; a folder whose runs were made otherwise, or not stamped, is
refused (``StaleRunLog``, exit 2) before any run. Writes ``<out>/results.md``.

    PYTHONPATH=. nice python benchmarks/multiturn_transfer.py --out runs/multiturn_transfer
    PYTHONPATH=. nice python benchmarks/multiturn_transfer.py --policy lm \\
        --out runs/multiturn_transfer_lm

``--suite pool`` runs either check on the second suite (train on the world model's
pretraining tasks, score on the held-out ``hr_*_s0`` and ``rd_*`` tasks' private test, real
turns replayed from the pool tables, world model v4)::

    PYTHONPATH=. nice python benchmarks/multiturn_transfer.py --suite pool \\
        --out runs/multiturn_transfer_pool
    PYTHONPATH=. nice python benchmarks/multiturn_transfer.py --policy lm --suite pool \\
        --heldout-tasks 0 --out runs/multiturn_transfer_lm_pool
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from wmrl_env.bench.multiturn import TransferConfig, markdown, run_transfer, transfer_fingerprint
from wmrl_env.bench.run_log import StaleRunLog, append_line, read_stamped
from wmrl_env.world_models.programs.ml_default import load_ml_world_model


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=("tabular", "lm"), default="tabular")
    parser.add_argument("--out", type=Path, default=None,
                        help="default: runs/multiturn_transfer[_lm]")  # fmt: skip
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/lm_reviser"),
                        help="where the cloned LM reviser is cached (--policy lm)")  # fmt: skip
    known, _ = parser.parse_known_args(argv)
    config_class: Any = TransferConfig
    if known.policy == "lm":
        from wmrl_env.bench.multiturn_lm import LMTransferConfig

        config_class = LMTransferConfig
    defaults = config_class()
    for f in fields(config_class):
        if f.name == "arms":
            continue
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(getattr(defaults, f.name)),
                            default=getattr(defaults, f.name))  # fmt: skip
    parser.add_argument("--arms", default=",".join(defaults.arms))
    args = parser.parse_args(argv)
    values = {f.name: getattr(args, f.name) for f in fields(config_class) if f.name != "arms"}
    config = config_class(**(values | {"arms": tuple(args.arms.split(","))}))
    out = args.out or Path("runs/multiturn_transfer" + ("_lm" if args.policy == "lm" else ""))
    out.mkdir(parents=True, exist_ok=True)
    version = "v4" if config.suite == "pool" else "v3"  # v4: the second suite's programs
    reviser = None
    if args.policy == "lm":
        from wmrl_env.code_policy.lm_reviser import make_lm_reviser

        reviser = make_lm_reviser(config.bc_seed, args.cache_dir, max_turns=config.max_turns)
    made_with = transfer_fingerprint(config, version, reviser)
    log = out / "runs.jsonl"
    finished = [{k: v for k, v in row.items() if k != "made_with"}
                for row in read_stamped(log, made_with)]  # fmt: skip

    def append(run: dict) -> None:
        append_line(log, {**run, "made_with": made_with})

    world_model = load_ml_world_model(version)
    if reviser is not None:
        text = _run_lm(config, world_model, reviser, finished, append, out)
    else:
        results = run_transfer(config, world_model, finished, on_run=append)
        (out / "results.json").write_text(json.dumps(results, indent=1))
        text = markdown(results)
    (out / "results.md").write_text(text)
    print(text)
    return text


def _run_lm(config: Any, world_model: Any, path: Path, finished, append, out: Path) -> str:
    from wmrl_env.bench.multiturn import _suite_executor
    from wmrl_env.bench.multiturn_lm import lm_markdown, run_lm_transfer
    from wmrl_env.code_policy import ReplayOrLiveExecutor
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox

    replay = _suite_executor(config.suite)  # read once, shared: closing it would empty it
    with default_sandbox(max_workers=1, warm=True) as live:
        executor = ReplayOrLiveExecutor(replay, live)
        results = run_lm_transfer(config, world_model, path, executor, finished, on_run=append)
        results["bc_log"] = json.loads((path / "bc_log.json").read_text())
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return lm_markdown(results)


if __name__ == "__main__":
    try:
        main()
    except StaleRunLog as error:
        print(f"multiturn_transfer: {error}", file=sys.stderr)
        sys.exit(2)
