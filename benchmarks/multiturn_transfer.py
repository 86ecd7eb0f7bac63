"""The transfer check for multi-turn ML agents: train in simulation, score for real.

Trains a :class:`~wmrl_env.bench.revision_policy.RevisionPolicy` per arm (``real``,
``anchors``, ``wmrl``, ``wm``) and seed on the ``train`` tasks through
``WorldModelVectorEnv`` with the default ML world model's simulated turns, then scores it on
the real multi-turn env and in simulation on the ``heldout`` tasks
(:mod:`wmrl_env.bench.multiturn`). Each finished run is appended to ``<out>/runs.jsonl``:
run the same command again to resume. Writes ``<out>/results.md``.

    PYTHONPATH=. nice python benchmarks/multiturn_transfer.py --out runs/multiturn_transfer
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path

from wmrl_env.bench.multiturn import TransferConfig, markdown, run_transfer
from wmrl_env.world_models import load_default_ml_world_model


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/multiturn_transfer"))
    defaults = TransferConfig()
    for f in fields(TransferConfig):
        if f.name == "arms":
            continue
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(getattr(defaults, f.name)),
                            default=getattr(defaults, f.name))  # fmt: skip
    parser.add_argument("--arms", default=",".join(defaults.arms))
    args = parser.parse_args(argv)
    values = {f.name: getattr(args, f.name) for f in fields(TransferConfig) if f.name != "arms"}
    config = TransferConfig(**(values | {"arms": tuple(args.arms.split(","))}))
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "runs.jsonl"
    finished = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def append(run: dict) -> None:
        with log.open("a") as handle:
            handle.write(json.dumps(run) + "\n")
            handle.flush()

    results = run_transfer(config, load_default_ml_world_model(), finished, on_run=append)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    text = markdown(results)
    (args.out / "results.md").write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
