"""How well PPO's critic explains the returns SB3VecEnv hands out: ``real`` against ``wmrl``
with the critic levels (the adapter's default) and ``wmrl`` at the fused rewards' own group
means (the adapter before the level fix: ``lam * f`` on world-model groups).

The demo bandit (``wmrl_env.demo``, 8 tasks x 4 answers, world model honest but for noise and
a monotone distortion), 25 % anchor groups, PPO with one step per rollout; the critic's
explained variance (SB3's ``train/explained_variance``: values predicted before each update
against the returns) pooled over the last ``--last`` rollouts, per seed.

    python benchmarks/bench_sb3_critic.py --seeds 4 --groups 8 --lr 1e-2 --epochs 10
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import stable_baselines3 as sb3
import torch
from stable_baselines3.common.utils import explained_variance

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.demo import BanditTaskEnv, BanditTasks, HackableWorldModel
from wmrl_env.integrations.sb3 import SB3VecEnv, weighted_rewards

ARMS = ("real", "wmrl", "wmrl_fused_means")


@dataclass
class Args:
    seeds: int = 4
    groups: int = 8
    group_size: int = 8
    rounds: int = 40
    last: int = 15
    lr: float = 1e-2
    epochs: int = 10
    ent_coef: float = 0.0
    rewards: str = "fused"
    exploits: int = 0


def make_env(arm: str, seed: int, args: Args) -> SB3VecEnv:
    tasks = BanditTasks.sample(
        np.random.default_rng(seed), num_tasks=8, num_answers=4, exploits_per_task=args.exploits
    )
    method = "real" if arm == "real" else "wmrl"
    fusion = RewardFusion(method=method, anchor_fraction=0.25, min_pairs=8, seed=seed)
    envs = SB3VecEnv(
        WorldModelVectorEnv(
            lambda: BanditTaskEnv(tasks),
            HackableWorldModel(tasks, seed=seed),
            num_groups=args.groups,
            group_size=args.group_size,
            fusion=fusion,
            executor="inline",
        ),
        rewards=args.rewards,
    )
    if arm == "wmrl_fused_means":  # the adapter before the level fix

        def old_rewards(info):
            weights = info["weight"] if args.rewards == "weighted" else np.ones(envs.num_envs)
            return weighted_rewards(info["fused_reward"], weights, envs.group_ids)

        envs._critic_rewards = old_rewards
    return envs


def value_error(model: sb3.PPO, success: np.ndarray) -> float:
    """RMS over tasks of the critic's V(task) minus the policy's true expected success."""
    obs = torch.arange(success.shape[0])
    with torch.no_grad():
        obs_t, _ = model.policy.obs_to_tensor(obs.numpy())
        values = model.policy.predict_values(obs_t).flatten().numpy()
        probs = model.policy.get_distribution(obs_t).distribution.probs.numpy()
    return float(np.sqrt(np.mean((values - (probs * success).sum(axis=1)) ** 2)))


def explained(arm: str, seed: int, args: Args) -> tuple[float, float]:
    """(explained variance pooled over the last rollouts, the critic's value error)."""
    envs = make_env(arm, seed, args)
    model = sb3.PPO(
        "MlpPolicy",
        envs,
        n_steps=1,
        batch_size=envs.num_envs,
        n_epochs=args.epochs,
        learning_rate=args.lr,
        ent_coef=args.ent_coef,
        seed=seed,
        device="cpu",
    )
    values, returns = [], []
    for _ in range(args.rounds):
        model.learn(total_timesteps=envs.num_envs, reset_num_timesteps=False)
        values.append(model.rollout_buffer.values.flatten().copy())
        returns.append(model.rollout_buffer.returns.flatten().copy())
    envs.close()
    success = BanditTasks.sample(
        np.random.default_rng(seed), num_tasks=8, num_answers=4, exploits_per_task=args.exploits
    ).success
    v, r = np.concatenate(values[-args.last :]), np.concatenate(returns[-args.last :])
    return float(explained_variance(v, r)), value_error(model, success)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, value in vars(Args()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = Args(**vars(parser.parse_args()))
    torch.set_num_threads(1)
    start = time.time()
    table = {arm: [] for arm in ARMS}
    for seed in range(args.seeds):
        for arm in ARMS:
            table[arm].append(explained(arm, seed, args))
        print(seed, {arm: np.round(v[-1], 3).tolist() for arm, v in table.items()}, flush=True)
    for arm, rows in table.items():
        ev, err = np.array(rows).T
        print(
            f"{arm:18s} EV {np.round(ev, 3)} (mean {ev.mean():+.3f})  "
            f"value error {np.round(err, 3)} (mean {err.mean():.3f})"
        )
    print(f"{time.time() - start:.0f} s, {vars(args)}")


if __name__ == "__main__":
    main()
