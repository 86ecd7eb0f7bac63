"""make_base_policy end to end on real MuJoCo (CPU-sized recipe), with its cache."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.robotics import HELD_OUT_SEED, make_base_policy, success_on_seeds

pytestmark = [pytest.mark.robosuite, pytest.mark.torch]

# the clean expert lifts in about 45 steps: both episodes succeed, the first one is cloned
TINY = {
    "num_episodes": 2,
    "bc_episodes": 1,
    "noise": 0.0,
    "perturb_prob": 0.0,
    "horizon": 60,
    "epochs": 3,
    "hidden": 16,
    "chunk_size": 4,
}


def test_make_base_policy_runs_caches_and_plays(tmp_path) -> None:
    import gymnasium as gym

    policy, demos = make_base_policy("Lift", seed=3, cache_dir=tmp_path, **TINY)
    assert demos.start_seeds.tolist() == [3000, 3001]
    assert demos.metadata["recipe"]["num_episodes"] == 2
    assert demos.episode_success.tolist() == [True, True]
    assert demos.metadata["cloned_episodes"] == [0]
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".npz", ".pt"]
    batch = demos.observations[:3]
    chunks = policy(batch, [policy.instruction] * 3)
    assert chunks.shape == (3, 4, 7) and chunks.dtype == np.float32
    assert np.abs(chunks).max() <= 1.0
    std = policy.log_std.detach().exp().numpy()
    assert std[3:6].max() < std[:3].min(), "rotation commands explore less"

    cached_policy, cached_demos = make_base_policy("Lift", seed=3, cache_dir=tmp_path, **TINY)
    np.testing.assert_array_equal(cached_demos.actions, demos.actions)
    np.testing.assert_array_equal(cached_policy(batch, [""] * 3), chunks)
    np.testing.assert_array_equal(cached_policy.log_std.detach(), policy.log_std.detach())

    env = gym.make("wmrl/Lift-v0", horizon=8, terminate_on_success=True)
    try:
        seeds = [HELD_OUT_SEED, HELD_OUT_SEED + 1]
        greedy = success_on_seeds(policy, env, seeds)
        sampled = success_on_seeds(policy, env, seeds, sampled=True)
    finally:
        env.close()
    assert greedy.shape == sampled.shape == (2,) and greedy.dtype == bool


def test_unknown_task_and_bad_recipe_raise() -> None:
    with pytest.raises(ValueError, match="no base-policy recipe"):
        make_base_policy("Door")
    with pytest.raises(TypeError):
        make_base_policy("Lift", epoch=3)  # a misspelt recipe field
    with pytest.raises(ValueError, match="at most"):
        make_base_policy("Lift", num_episodes=10_000)
