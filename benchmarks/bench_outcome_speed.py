"""How fast an ML world model answers the prediction contract, per CPU-second.

    python benchmarks/bench_outcome_speed.py [--version v3] [--batch 256] [--rounds 8]
        [--out runs/speed.json]

Programs per CPU-second of this process (its CPU time: what one idle core does; on a shared
machine the wall time mostly measures the other jobs) for ``predict`` and
``predict_outcomes`` (``predict`` plus the pre-gate and the status model), at batch
``--batch``, GRPO groups of 8 sharing one of the 39 held-out tasks (every task seen before),
in three regimes: ``new_code`` (every program has a statement no program had: parsed),
``new_comment`` (every text unseen, but it differs from one seen before only by a comment
line: answered from the cache by its code key) and ``cached`` (the same texts again).
``parse_only`` (``ast.parse``) and ``compile_only`` (``compile``) of the ``new_code`` texts,
timed in the same run, are the floor a parsing model cannot beat. Each method runs on a
freshly loaded model; ``*_parsed_share`` is the share of a regime's programs that were parsed
(the rest came from a cache: the featurizer's by text or by code key, or the rows' and
status model's by task and program). ``--version`` picks the world model (default: the
package's default). ``new_grammar`` (timed for every version) is new programs of the open
space's grammar, exactly as it renders them, on the pool suite's six generated tasks in
groups of 8: the programs v4 was built to read.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import time
from pathlib import Path

GROUP_SIZE = 8


def programs(batch: int, rounds: int, tag: str) -> list[list[str]]:
    from wmrl_env.envs.ml_tasks.programs import all_programs, render_program

    specs = all_programs()
    return [
        [render_program(specs[i % len(specs)], "binary") + tag.format(r=r, i=i)
         for i in range(batch)]
        for r in range(rounds)
    ]  # fmt: skip


def per_cpu_second(call, batches) -> float:
    start = time.process_time()
    for texts in batches:
        call(texts)
    return sum(len(t) for t in batches) / (time.process_time() - start)


def _parse_each(texts: list[str]) -> None:
    for text in texts:  # each tree dropped at once, as the featurizer does
        ast.parse(text)


def _compile_each(texts: list[str]) -> None:
    for text in texts:
        compile(text, "<p>", "exec", dont_inherit=True)


def grammar_programs(batch: int, rounds: int) -> tuple[list[str], list[list[str]]]:
    """Contexts (the pool suite's tasks, groups of 8) and ``rounds`` batches of new grammar
    programs rendered for each task's kind."""
    from wmrl_env.envs.ml_tasks.grammar import sample_programs
    from wmrl_env.envs.ml_tasks.headroom import headroom_task
    from wmrl_env.envs.ml_tasks.pool import POOL_TASKS

    tasks = [headroom_task(t) for t in POOL_TASKS]
    grouped = [tasks[(i // GROUP_SIZE) % len(tasks)] for i in range(batch)]
    points = sample_programs(batch * rounds, seed=7)
    texts = [
        [points[r * batch + i].render(grouped[i].kind) for i in range(batch)] for r in range(rounds)
    ]
    return [t.description for t in grouped], texts


def measure(batch: int, rounds: int, version: str | None = None) -> dict:
    from wmrl_env.envs.ml_tasks import get_task, task_ids
    from wmrl_env.world_models import load_default_ml_world_model
    from wmrl_env.world_models.programs.ml_default import load_ml_world_model

    def load():
        return load_default_ml_world_model() if version is None else load_ml_world_model(version)

    tasks = [get_task(t).description for t in task_ids("heldout")]
    grouped = [tasks[(i // GROUP_SIZE) % len(tasks)] for i in range(batch)]
    grammar_contexts, new_grammar = grammar_programs(batch, rounds)
    new_code = programs(batch, rounds, "_round_{r}_item_{i} = {i}\n")
    new_comment = programs(batch, rounds, "# round {r} item {i}\n")
    for text in new_code[0][:64]:  # warm the interpreter before the floors are timed
        compile(text, "<p>", "exec", dont_inherit=True)
        ast.parse(text)
    out = {
        "version": version or "default",
        "batch": batch,
        "programs_per_regime": batch * rounds,
        "parse_only": per_cpu_second(_parse_each, new_code),
        "compile_only": per_cpu_second(_compile_each, new_code),
    }
    for method in ("predict", "predict_outcomes"):
        model = load()
        call = getattr(model, method)
        call(grouped, programs(batch, 1, "")[0])  # the tasks' features, once per task
        call(grammar_contexts, programs(batch, 1, "")[0])

        def batch_call(texts: list[str], call=call) -> None:
            call(grouped, texts)

        def grammar_call(texts: list[str], call=call) -> None:
            call(grammar_contexts, texts)

        featurizer = getattr(getattr(model, "rows", None), "programs", None)  # v2 and v3
        regimes = {"new_code": new_code, "new_comment": new_comment, "cached": new_code}
        for regime, batches in regimes.items():
            parsed = featurizer.parsed if featurizer is not None else 0
            out[f"{method}_{regime}"] = per_cpu_second(batch_call, batches)
            if featurizer is not None:
                share = (featurizer.parsed - parsed) / (batch * rounds)
                out[f"{method}_{regime}_parsed_share"] = share
        out[f"{method}_new_grammar"] = per_cpu_second(grammar_call, new_grammar)
        if featurizer is not None:
            hits = {"exact": featurizer.hits, "code": featurizer.code_hits}
            out[f"{method}_parse_cache_hits"] = hits
    out["load_average"] = os.getloadavg()
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=None, help="world model (default: the default)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    result = measure(args.batch, args.rounds, args.version)
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
