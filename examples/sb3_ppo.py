"""Stable-Baselines3 PPO trained on a world-model env through the SB3 adapter.

The same hackable contextual bandit as ``grpo_bandit.py`` (:mod:`wmrl_env.demo`'s
``BanditTasks``, ``BanditTaskEnv`` and ``HackableWorldModel``): PPO sees fused rewards (real on
the anchor groups, calibrated world model elsewhere) through ``SB3VecEnv``, the one place
where gymnasium's vector contract is converted to SB3's.

    python examples/sb3_ppo.py --timesteps 20000
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecMonitor

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.demo import BanditTaskEnv, BanditTasks, HackableWorldModel
from wmrl_env.integrations.sb3 import SB3VecEnv
from wmrl_env.utils.args import parse_args


@dataclass
class Args:
    """SB3 PPO on a hackable contextual bandit."""

    method: str = field(default="wmrl", metadata={"help": "real | wm | debias | wmrl | ppi"})
    timesteps: int = field(default=20_000, metadata={"help": "PPO environment steps"})
    num_groups: int = field(default=16, metadata={"help": "groups per round"})
    group_size: int = field(default=8, metadata={"help": "answers sampled per task"})
    n_steps: int = field(default=16, metadata={"help": "PPO rollout length per env"})
    seed: int = field(default=0, metadata={"help": "seeds tasks, fusion and PPO"})


def main(argv: list[str] | None = None) -> float:
    args = parse_args(Args, argv)
    torch.set_num_threads(1)  # a tiny network: more threads only contend
    tasks = BanditTasks.sample(np.random.default_rng(args.seed), num_tasks=16, num_answers=8)
    envs = WorldModelVectorEnv(
        lambda: BanditTaskEnv(tasks),
        HackableWorldModel(tasks, args.seed),
        num_groups=args.num_groups,
        group_size=args.group_size,
        fusion=RewardFusion(args.method, anchor_fraction=0.1, seed=args.seed),
        executor="inline",
    )
    venv = VecMonitor(SB3VecEnv(envs, failed_reward=0.0))
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=args.n_steps,
        batch_size=128,
        seed=args.seed,
        learning_rate=3e-3,
        policy_kwargs={"net_arch": [32]},
        device="cpu",
    )
    model.learn(total_timesteps=args.timesteps)
    task_ids = np.arange(tasks.success.shape[0])
    answers, _ = model.predict(task_ids, deterministic=True)
    true_success = float(np.mean(tasks.success[task_ids, answers]))
    print(f"method {args.method}: greedy policy's true success {true_success:.3f}")
    venv.close()
    return true_success


if __name__ == "__main__":
    main()
