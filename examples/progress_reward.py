"""A progress world model on robosuite Lift: pretrained on the scripted expert's episodes,
updated on the policy's own real episodes every round, scored on the next round's.

Each round plays ``--groups`` fresh training starts x ``--group-size`` sampled episodes of the
behaviour-cloned base policy in the real simulator, then prints, for the progress model as it
stood *before* seeing them (out of sample): the ROC AUC of predicting each episode's success
from its predicted final progress, over all episodes and within starts (only pairs from one
start: what GRPO's advantages compare), the mean predicted std against the actual error on
the final states, and how many all-failure groups the fused dense reward still ranks (sparse
success gives them no advantage at all). Then the model is updated on the round's episodes.

    python examples/progress_reward.py --seed 0 --rounds 3 --groups 8 --group-size 4

Needs the ``robosuite`` and ``torch`` extras.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from wmrl_env.bench.robotics.predictor_check import predictor_check
from wmrl_env.robotics import make_base_policy
from wmrl_env.robotics.episodes import sampled_groups
from wmrl_env.robotics.progress import (
    DenseProgressFusion,
    ProgressModel,
    demonstration_episodes,
    progress_labels,
    progress_returns,
)

TRAINING_STARTS = 500_000  # start seeds apart from demonstrations (seed * 1000 + i) and held-out


def run(seed: int, rounds: int, groups: int, group_size: int, cache_dir: str) -> list[dict]:
    import torch

    from wmrl_env.envs.robosuite import RobosuiteEnv

    torch.set_num_threads(1)
    policy, demos = make_base_policy("Lift", seed=seed, cache_dir=cache_dir)
    model = ProgressModel(seed=seed).pretrain(demonstration_episodes(demos))
    fusion = DenseProgressFusion(dense_weight=0.5, min_pairs=groups * group_size)
    horizon = int(demos.metadata["horizon"])
    env = RobosuiteEnv("Lift", horizon=horizon, reward_shaping=False, terminate_on_success=True)
    policy.generator.manual_seed(seed)
    rows = []
    try:
        for r in range(rounds):
            first = TRAINING_STARTS + 10_000 * seed + r * groups
            episodes, group_ids = sampled_groups(
                policy, env, range(first, first + groups), group_size
            )
            success = np.array([s for _, s in episodes])
            finals = np.stack([states[-1] for states, _ in episodes])
            final, std = model.predict(finals)
            check = predictor_check(final, success, group_ids)
            target = np.array([progress_labels(len(st) - 1, s)[-1] for st, s in episodes])
            dense = progress_returns(model, [states for states, _ in episodes])
            _, advantages = fusion.step(group_ids, dense, success.astype(float))
            all_failed = [g for g in np.unique(group_ids) if not success[group_ids == g].any()]
            ranked = sum(np.ptp(advantages[group_ids == g]) > 0 for g in all_failed)
            rows.append(
                {
                    "seed": seed,
                    "round": r,
                    "episodes": check.episodes,
                    "success_rate": check.success_rate,
                    "auc": check.auc,
                    "within_start_auc": check.within_group_auc,
                    "mean_std": float(std.mean()),
                    "rmse_final": float(np.sqrt(np.mean((final - target) ** 2))),
                    "all_failure_groups": len(all_failed),
                    "all_failure_groups_ranked": int(ranked),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            model.update(episodes)
    finally:
        env.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--cache-dir", default="runs/base_policy")
    args = parser.parse_args()
    run(args.seed, args.rounds, args.groups, args.group_size, args.cache_dir)


if __name__ == "__main__":
    main()
