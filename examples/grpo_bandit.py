"""GRPO on a contextual bandit whose world model can be hacked, through WorldModelVectorEnv.

Each task (the observation) has a few candidate answers (the action); the real env returns a
noisy 0/1 success. The world model scores answers from a distorted view of the truth and
over-scores one *wrong* answer per task: a policy trained on it alone learns the exploit.
With ``--method wmrl`` (default) 10 % of the groups run for real each round, and the fusion
calibrates and down-weights the world model; compare ``--method wm`` and ``--method real``.
The task, its real env and the world model are :mod:`wmrl_env.demo`'s (``BanditTasks``,
``BanditTaskEnv``, ``HackableWorldModel``).

    python examples/grpo_bandit.py --method wmrl --iterations 150
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.demo import BanditTaskEnv, BanditTasks, HackableWorldModel
from wmrl_env.grpo import GRPOConfig, make_policy, train
from wmrl_env.utils.args import parse_args


@dataclass
class Args:
    """GRPO on a hackable contextual bandit."""

    method: str = field(default="wmrl", metadata={"help": "real | wm | debias | wmrl | ppi"})
    iterations: int = field(default=150, metadata={"help": "training rounds"})
    num_groups: int = field(default=32, metadata={"help": "groups per round"})
    group_size: int = field(default=8, metadata={"help": "answers sampled per task"})
    anchor_fraction: float = field(default=0.1, metadata={"help": "share of groups run for real"})
    num_tasks: int = field(default=16, metadata={"help": "distinct tasks"})
    num_answers: int = field(default=8, metadata={"help": "candidate answers per task"})
    learning_rate: float = field(default=0.1, metadata={"help": "Adam learning rate"})
    seed: int = field(default=0, metadata={"help": "seeds tasks, env, fusion and policy"})


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(Args, argv)
    torch.set_num_threads(1)  # a tiny policy: more threads only contend
    tasks = BanditTasks.sample(np.random.default_rng(args.seed), args.num_tasks, args.num_answers)
    envs = WorldModelVectorEnv(
        lambda: BanditTaskEnv(tasks),
        HackableWorldModel(tasks, args.seed),
        num_groups=args.num_groups,
        group_size=args.group_size,
        fusion=RewardFusion(args.method, anchor_fraction=args.anchor_fraction, seed=args.seed),
        executor="inline",  # the real env is a dice roll: threads would only add overhead
    )
    policy = make_policy(envs.single_observation_space, envs.single_action_space, 0, seed=args.seed)
    config = GRPOConfig(
        iterations=args.iterations, learning_rate=args.learning_rate, seed=args.seed
    )

    def true_success(rollout) -> np.ndarray:
        return tasks.success[rollout.observations[0], rollout.actions[0]]

    def log(row: dict) -> None:
        if row["iteration"] % 10 == 0 or row["iteration"] == args.iterations - 1:
            print(
                f"iter {row['iteration']:4d}  true {row['true_reward_mean']:.3f}  "
                f"real {row['real_reward_mean']:.3f}  kappa {row['kappa']:.2f}  "
                f"anchors {row['n_anchor_groups']}  real {row['real_exec_seconds'] * 1e3:.1f} ms  "
                f"wm {row['wm_seconds'] * 1e3:.1f} ms"
            )

    history = train(envs, policy, config, true_reward=true_success, log=log)
    envs.close()
    return history


if __name__ == "__main__":
    main()
