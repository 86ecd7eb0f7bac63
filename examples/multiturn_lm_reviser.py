"""A code LM that revises its ML program over several turns, post-trained mostly in a world model.

1. Behaviour cloning: a small GPT-2 built from a config (no download) learns revision pairs
   mined from the execution table's real runs: a failing program and the report its run
   printed -> a program that runs; a program that scored -> a neighbour, or ``STOP``
   (:func:`~wmrl_env.code_policy.lm_reviser.make_lm_reviser`, cached on disk).
2. GRPO over whole episodes through ``WorldModelVectorEnv``: each round ``num_groups`` training
   tasks with ``group_size`` episodes each; anchor groups play their episodes for real, the
   others are answered turn by turn by the world model
   (:class:`~wmrl_env.envs.ml_tasks.simulator.TurnSimulator`), and the fused per-episode
   advantage weights every program the LM wrote in that episode.
3. The LM is scored on held-out tasks in the real multi-turn env and in simulation.

Real executions replay the committed execution table where it holds the program and run live in
the local sandbox otherwise.

    python examples/multiturn_lm_reviser.py --method wmrl --rounds 4
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from wmrl_env.bench.multiturn_lm import LMTransferConfig, train_lm_arm
from wmrl_env.code_policy import ReplayOrLiveExecutor
from wmrl_env.code_policy.lm_reviser import make_lm_reviser
from wmrl_env.envs.ml_tasks import load_table, task_ids
from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
from wmrl_env.utils.args import parse_args
from wmrl_env.world_models import load_default_ml_world_model


@dataclass
class Args:
    """Behaviour-clone the code LM as a reviser, then GRPO over episodes with real anchors."""

    method: str = field(default="wmrl", metadata={"help": "real | anchors | wmrl | wm"})
    rounds: int = field(default=4, metadata={"help": "GRPO rounds"})
    num_groups: int = field(default=8, metadata={"help": "training tasks per round"})
    group_size: int = field(default=4, metadata={"help": "episodes per task"})
    anchor_fraction: float = field(default=0.25, metadata={"help": "groups run for real"})
    max_turns: int = field(default=3, metadata={"help": "programs per episode"})
    learning_rate: float = field(default=2e-4, metadata={"help": "GRPO learning rate"})
    heldout_tasks: int = field(default=8, metadata={"help": "held-out tasks scored (0: all)"})
    bc_tasks_per_split: int = field(
        default=0, metadata={"help": "tasks of each cloned split (0: all)"}
    )
    bc_epochs: int = field(default=3, metadata={"help": "behaviour-cloning epochs"})
    hidden_size: int = field(default=64, metadata={"help": "the GPT-2's width"})
    num_layers: int = field(default=2, metadata={"help": "the GPT-2's depth"})
    cache_dir: str = field(default="runs/lm_reviser", metadata={"help": "cloned LM cache"})
    seed: int = field(default=0, metadata={"help": "seeds the clone, the rounds and sampling"})


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(Args, argv)
    start = time.perf_counter()
    path = make_lm_reviser(
        args.seed,
        args.cache_dir,
        max_turns=args.max_turns,
        tasks_per_split=args.bc_tasks_per_split,
        epochs=args.bc_epochs,
        hidden_size=args.hidden_size,
        num_layers=args.num_layers,
        num_heads=2,
    )
    print(f"cloned LM reviser in {path} ({time.perf_counter() - start:.0f} s so far)")
    config = LMTransferConfig(
        arms=(args.method,),
        seeds=1,
        rounds=args.rounds,
        num_groups=args.num_groups,
        group_size=args.group_size,
        anchor_fraction=args.anchor_fraction,
        max_turns=args.max_turns,
        learning_rate=args.learning_rate,
        eval_every=args.rounds,
        eval_episodes=1,
        heldout_tasks=args.heldout_tasks,
    )
    heldout = list(task_ids("heldout"))[: args.heldout_tasks or None]
    live = default_sandbox(max_workers=1, warm=True)
    with ReplayOrLiveExecutor(load_table().replay_executor(), live) as executor:
        run = train_lm_arm(
            args.method, args.seed, config, load_default_ml_world_model(), heldout, path, executor
        )
    print("round  loss")
    for k, loss in enumerate(run["losses"], start=1):
        print(f"{k:5d}  {loss:+.4f}")
    final = run["checkpoints"][-1]
    print(
        f"after {final['round']} rounds, {final['real_executions']} real executions: held-out "
        f"best score real {final['real_best']:.3f}, simulated {final['sim_best']:.3f}; "
        f"runs after a failure real {final['real_fix_rate']:.2f}, simulated "
        f"{final['sim_fix_rate']:.2f} ({time.perf_counter() - start:.0f} s)"
    )
    return run


if __name__ == "__main__":
    main()
