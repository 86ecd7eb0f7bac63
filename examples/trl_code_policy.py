"""A language model writes the programs: TRL GRPO with world-model rewards, end to end on a CPU.

1. A small GPT-2 is behaviour-cloned to write solution programs for the ML task suite
   (:func:`wmrl_env.code_policy.make_code_policy`, cached on disk): the grid's programs and
   recombinations of their pieces, so it writes programs the 72-program grid lacks.
2. TRL's ``GRPOTrainer`` (:class:`~wmrl_env.integrations.trl.WMRLGRPOTrainer`) post-trains it
   on a few held-out tasks, each prompt a GRPO group. :class:`WorldModelReward` scores every
   program with the default world model (v2 reads the program text); anchor groups run for
   real: replayed from the execution table when it holds the program (charged its recorded
   seconds), else live in the warm local sandbox; a crash scores 0.
3. Before and after: the real score of the greedy program of each task, and of sampled ones.

Arms: ``real`` (every group executed), ``anchors`` (only as many groups as a fused arm
executes, all real), ``wmrl`` and ``ppi`` (every group, a share anchored). Results go to
``<out-dir>/<arm>-seed<seed>/result.json``; a run resumes from its last checkpoint.

    python examples/trl_code_policy.py --arm wmrl --seed 0 --steps 8
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from wmrl_env.code_policy import (
    ReplayOrLiveExecutor,
    ScoreProgramFailures,
    execute_programs,
    grid_hashes,
    make_code_policy,
    sample_programs,
    summarise,
    task_prompt,
)
from wmrl_env.sandboxes import does_not_parse
from wmrl_env.utils.args import parse_args

ARMS = ("real", "anchors", "wmrl", "ppi")


@dataclass
class Args:
    """TRL GRPO of a behaviour-cloned code policy with world-model rewards."""

    arm: str = field(default="wmrl", metadata={"help": " | ".join(ARMS)})
    seed: int = field(default=0, metadata={"help": "seeds GRPO sampling and the anchor draw"})
    tasks: str = field(
        default="daag_antigua,aer_teachingratings,multgee_housing,stat2data_heatingoil",
        metadata={"help": "comma-separated held-out tasks (one GRPO group each per step)"},
    )
    steps: int = field(default=8, metadata={"help": "GRPO steps"})
    num_generations: int = field(default=8, metadata={"help": "programs per group"})
    anchor_fraction: float = field(default=0.25, metadata={"help": "share of groups executed"})
    learning_rate: float = field(default=2e-4, metadata={"help": "AdamW learning rate"})
    max_completion_length: int = field(default=128, metadata={"help": "program tokens"})
    eval_samples: int = field(default=16, metadata={"help": "sampled programs per task, eval"})
    bc_seed: int = field(default=0, metadata={"help": "which behaviour-cloned start"})
    bc_per_task: int = field(default=24, metadata={"help": "cloned programs per task"})
    bc_epochs: int = field(default=4, metadata={"help": "behaviour-cloning epochs"})
    bc_splits: str = field(default="wm,train", metadata={"help": "splits the clone sees"})
    live_workers: int = field(default=2, metadata={"help": "warm sandbox workers"})
    cache_dir: str = field(default="runs/code_policy", metadata={"help": "cloned policies"})
    out_dir: str = field(default="runs/trl_code_policy", metadata={"help": "results"})
    known_failures: bool = field(
        default=True,
        metadata={
            "help": "score programs that do not parse as failures without executing them "
            "(false: their invalid prediction forces the whole group to execute)"
        },
    )


def evaluate(model, tokenizer, tasks, executor, args) -> dict:
    """Real scores of each task's greedy program and of ``eval_samples`` sampled ones."""
    prompts = [task_prompt(t) for t in tasks]
    greedy = [g[0] for g in sample_programs(model, tokenizer, prompts, 1, greedy=True)]
    sampled = sample_programs(model, tokenizer, prompts, args.eval_samples, seed=10_000)
    flat = [p for programs in sampled for p in programs]
    outcomes = execute_programs(
        list(tasks) + [t for t in tasks for _ in range(args.eval_samples)], greedy + flat, executor
    )
    return {
        "greedy": {t: o.score for t, o in zip(tasks, outcomes[: len(tasks)], strict=True)},
        "greedy_in_grid": {t: o.in_grid for t, o in zip(tasks, outcomes, strict=False)},
        "sampled": summarise(outcomes[len(tasks) :]),
    }


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(Args, argv)
    if args.arm not in ARMS:
        raise ValueError(f"--arm must be one of {ARMS}, got {args.arm!r}")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from wmrl_env.envs.ml_tasks import get_task, load_table
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
    from wmrl_env.fusion import RewardFusion
    from wmrl_env.integrations.trl import WMRLGRPOTrainer, WorldModelReward
    from wmrl_env.world_models import load_default_ml_world_model

    torch.set_num_threads(1)  # a model this small: more threads only wait on each other
    tasks = tuple(args.tasks.split(","))
    run_dir = Path(args.out_dir) / f"{args.arm}-seed{args.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    # 1. the behaviour-cloned start (built once per recipe and seed, then read from disk)
    policy_dir = make_code_policy(
        args.bc_seed,
        args.cache_dir,
        per_task=args.bc_per_task,
        epochs=args.bc_epochs,
        splits=tuple(args.bc_splits.split(",")),
    )
    model = AutoModelForCausalLM.from_pretrained(policy_dir)
    tokenizer = AutoTokenizer.from_pretrained(policy_dir, padding_side="left")

    # real executions: the table's recorded runs where it holds the program, else live
    live = default_sandbox(max_workers=args.live_workers, warm=True)
    executor = ScoreProgramFailures(ReplayOrLiveExecutor(load_table().replay_executor(), live))
    before = evaluate(model, tokenizer, tasks, executor, args)
    print("before:", json.dumps(before["greedy"]), f"sampled {before['sampled']['mean_score']:.3f}")

    # 2. the reward: world model v2 on every program, anchor groups executed for real
    fused = args.arm in ("wmrl", "ppi")
    groups_per_step = (
        len(tasks)
        if args.arm != "anchors"
        else max(1, math.ceil(args.anchor_fraction * len(tasks)))
    )
    fusion = RewardFusion(
        method=args.arm if fused else "real", anchor_fraction=args.anchor_fraction, seed=args.seed
    )
    grids = {t: grid_hashes(t) for t in tasks}
    calls_path = run_dir / "calls.jsonl"

    class LoggedReward(WorldModelReward):
        """Appends what each call executed to calls.jsonl (kept across resumptions)."""

        def __call__(self, prompts, completions, **kwargs):
            returned = super().__call__(prompts, completions, **kwargs)
            call = self.last_call
            rows = []
            for i in np.flatnonzero(call.is_anchor & ~call.known_failure):
                job_hash = get_task(kwargs["task_id"][i]).make_job(completions[i]).tags
                rows.append(
                    {
                        "task_id": kwargs["task_id"][i],
                        "wm": float(call.prediction.scores[i]),
                        "real": float(call.real_scores[i]),
                        "in_grid": job_hash["program_hash"] in grids[kwargs["task_id"][i]],
                    }
                )
            seconds = sum(r.exec_seconds for r in call.results)
            record = {
                "executed": rows,
                "exec_seconds": seconds,
                "known_failures": int(call.known_failure.sum()),
                "forced_groups": _forced_groups(call) if fused else 0,
            }
            with open(calls_path, "a") as file:
                file.write(json.dumps(record) + "\n")
            return returned

    reward = LoggedReward(
        load_default_ml_world_model(),
        executor,
        to_job=lambda prompt, completion, task_id: get_task(task_id).make_job(completion),
        to_context=lambda prompt, task_id: get_task(task_id).description,
        fusion=fusion,
        update_world_model=fused,
        known_failure=does_not_parse if args.known_failures else None,
    )

    # 3. GRPO through TRL: prompts in task order, one group per task and step. GPT-2's
    # positions are absolute and TRL scores left-padded prompts without position ids: the
    # default tasks' prompts have the same token count, so no prompt is padded.
    order = [tasks[i % len(tasks)] for i in range(groups_per_step * args.steps)]
    dataset = Dataset.from_dict({"prompt": [task_prompt(t) for t in order], "task_id": order})
    config = GRPOConfig(
        output_dir=str(run_dir / "grpo"),
        per_device_train_batch_size=groups_per_step * args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_steps=args.steps,
        learning_rate=args.learning_rate,
        beta=0.0,
        scale_rewards="none",
        shuffle_dataset=False,
        temperature=1.0,
        logging_steps=1,
        save_strategy="steps",
        save_steps=5,
        report_to=[],
        use_cpu=True,
        seed=args.seed,
        log_completions=False,
    )
    trainer = WMRLGRPOTrainer(
        model=model,
        reward=reward,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    checkpoints = list((run_dir / "grpo").glob("checkpoint-*"))
    if not checkpoints and calls_path.exists():
        calls_path.unlink()  # a run that died before its first checkpoint starts over
    trainer.train(resume_from_checkpoint=bool(checkpoints) or None)

    trainer.save_model(str(run_dir / "final"))  # evaluated as saved: the trainer's copy is
    final = AutoModelForCausalLM.from_pretrained(run_dir / "final")  # left in training mode
    after = evaluate(final, tokenizer, tasks, executor, args)
    executor.close()
    print("after: ", json.dumps(after["greedy"]), f"sampled {after['sampled']['mean_score']:.3f}")

    # 4. the record: scores, real executions, seconds, and the world model off the grid
    calls = [json.loads(line) for line in calls_path.read_text().splitlines()]
    executed = [row for call in calls for row in call["executed"]]
    off_grid = [r for r in executed if not r["in_grid"] and math.isfinite(r["wm"])]
    result = {
        "args": asdict(args),
        "before": before,
        "after": after,
        "real_executions": len(executed),
        "real_exec_seconds": sum(call["exec_seconds"] for call in calls),
        "wall_seconds": time.perf_counter() - start,
        "known_failures": sum(call.get("known_failures", 0) for call in calls),
        "forced_groups": sum(call.get("forced_groups", 0) for call in calls),
        "off_grid_executed": len(off_grid),
        "wm_spearman_off_grid": _spearman(
            [r["wm"] for r in off_grid], [r["real"] for r in off_grid]
        ),
        "load_average": os.getloadavg(),
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def _forced_groups(call) -> int:
    """Groups executed with certainty (inclusion probability 1: an invalid prediction) in a
    fused arm, whose draw has probabilities below 1."""
    forced = call.fusion.is_anchor & (call.fusion.inclusion == 1)
    return int(np.unique(call.group_ids[forced]).size)


def _spearman(x: list[float], y: list[float]) -> float:
    from scipy.stats import spearmanr

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(spearmanr(x, y).statistic)


if __name__ == "__main__":
    main()
