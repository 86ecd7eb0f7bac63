"""Multi-turn ML agents in a world model: a policy revises its program over several turns, most
groups answered turn by turn by the world model, a few run for real as anchors.

Each round, ``WorldModelVectorEnv`` starts ``num_groups`` training tasks with ``group_size``
episodes each. An episode is up to ``max_turns`` programs: the agent reads the last run's
report (status, error class, traceback tail, validation score) and sends the next program.
Anchor groups play whole episodes in the real env (replayed executions of the task suite);
the others are simulated by :class:`~wmrl_env.envs.ml_tasks.simulator.TurnSimulator`, which
renders the world model's predicted report in the same format. The fused advantages update a
:class:`~wmrl_env.bench.revision_policy.RevisionPolicy` (REINFORCE); every few rounds the
policy is scored on held-out tasks for real and in simulation, so a sim-to-real gap shows.

    python examples/multiturn_revise.py --method wmrl --rounds 12
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wmrl_env.bench.multiturn import TransferConfig, train_arm
from wmrl_env.envs.ml_tasks import task_ids
from wmrl_env.utils.args import parse_args
from wmrl_env.world_models import load_default_ml_world_model


@dataclass
class Args:
    """GRPO over multi-turn ML episodes, answered mostly by the world model."""

    method: str = field(default="wmrl", metadata={"help": "real | anchors | wmrl | wm"})
    rounds: int = field(default=12, metadata={"help": "training rounds"})
    num_groups: int = field(default=16, metadata={"help": "training tasks per round"})
    group_size: int = field(default=4, metadata={"help": "episodes per task"})
    anchor_fraction: float = field(default=0.125, metadata={"help": "groups run for real"})
    max_turns: int = field(default=3, metadata={"help": "programs per episode"})
    heldout_tasks: int = field(default=12, metadata={"help": "held-out tasks scored (0: all)"})
    seed: int = field(default=0, metadata={"help": "seeds the rounds, the fusion and the policy"})


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(Args, argv)
    config = TransferConfig(
        arms=(args.method,),
        seeds=1,
        rounds=args.rounds,
        num_groups=args.num_groups,
        group_size=args.group_size,
        anchor_fraction=args.anchor_fraction,
        max_turns=args.max_turns,
        eval_every=max(1, args.rounds // 3),
        eval_episodes=1,
        heldout_tasks=args.heldout_tasks,
    )
    world_model = load_default_ml_world_model()
    heldout = list(task_ids("heldout"))[: args.heldout_tasks or None]
    run = train_arm(args.method, args.seed, config, world_model, heldout)
    print("round  real executions  held-out score: real / simulated")
    for c in run["checkpoints"]:
        scores = f"{c['real_best']:.3f} / {c['sim_best']:.3f}"
        print(f"{c['round']:5d}  {c['real_executions']:15d}  {scores}")
    print("learned first-program logits:", np.round(run["params"][:13], 2).tolist())
    return run


if __name__ == "__main__":
    main()
