"""Scripted-expert demonstrations: reproducible from their seeds, saved and loaded intact."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from wmrl_env.robotics.demonstrations import Demonstrations, collect_demonstrations


@pytest.fixture(scope="module")
def lift_demos() -> Demonstrations:
    pytest.importorskip("robosuite", reason="needs robosuite (pip install 'wmrl-env[robosuite]')")
    return collect_demonstrations("wmrl/Lift-v0", 3, noise=0.3, perturb_prob=0.05, horizon=40)


def _assert_same(first: Demonstrations, second: Demonstrations, skip: tuple = ()) -> None:
    for field in fields(Demonstrations):
        if field.name in skip:
            continue
        a, b = getattr(first, field.name), getattr(second, field.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype, field.name
            np.testing.assert_array_equal(a, b, err_msg=field.name)
        else:
            assert a == b, field.name


@pytest.mark.robosuite
def test_collected_arrays_are_consistent(lift_demos: Demonstrations) -> None:
    demos = lift_demos
    assert demos.observations.shape == (demos.num_steps, 60)
    assert demos.actions.shape == (demos.num_steps, 7) and demos.actions.dtype == np.float32
    assert demos.start_seeds.tolist() == [0, 1, 2]
    assert sorted(set(demos.episode.tolist())) == [0, 1, 2]
    within = demos.episode[1:] == demos.episode[:-1]
    np.testing.assert_array_equal(
        demos.next_observations[:-1][within], demos.observations[1:][within]
    )
    lengths = np.bincount(demos.episode)
    success = demos.episode_success
    assert ((lengths == 40) | success).all(), "an episode ends at the horizon or on success"
    assert demos.terminals.sum() == success.sum()
    assert demos.metadata["noise"] == 0.3


@pytest.mark.robosuite
def test_same_seeds_reproduce_and_a_start_is_exact(lift_demos: Demonstrations) -> None:
    _assert_same(
        lift_demos,
        collect_demonstrations("wmrl/Lift-v0", 3, noise=0.3, perturb_prob=0.05, horizon=40),
    )
    one = collect_demonstrations(
        "wmrl/Lift-v0", 1, noise=0.3, perturb_prob=0.05, seed=2, horizon=40
    )
    third = lift_demos.select_episodes(np.array([False, False, True]))
    _assert_same(one, third, skip=("metadata",))  # the same episode, after no history
    assert (one.metadata["seed"], third.metadata["seed"]) == (2, 0)


@pytest.mark.robosuite
def test_save_load_round_trip(tmp_path, lift_demos: Demonstrations) -> None:
    path = lift_demos.save(tmp_path / "sub" / "lift.npz")
    _assert_same(lift_demos, Demonstrations.load(path))


def _toy(values: list[float], episodes: list[int]) -> Demonstrations:
    steps = len(values)
    column = np.asarray(values, np.float32)[:, None]
    return Demonstrations(
        env_id="toy",
        observations=column,
        actions=column,
        rewards=np.zeros(steps, np.float32),
        next_observations=column,
        successes=np.asarray([v > 0 for v in values]),
        terminals=np.zeros(steps, bool),
        episode=np.asarray(episodes, np.int64),
        start_seeds=np.arange(max(episodes) + 1),
        metadata={},
    )


def test_successful_keeps_successful_episodes_renumbered() -> None:
    demos = _toy([0.0, 0.0, 0.0, 1.0, 0.0, 1.0], [0, 0, 1, 1, 2, 2])
    kept = demos.successful()
    assert kept.episode.tolist() == [0, 0, 1, 1]
    assert kept.start_seeds.tolist() == [1, 2]
    assert kept.observations[:, 0].tolist() == [0.0, 1.0, 0.0, 1.0]


def test_bad_demonstrations_raise_clear_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="NaN or inf in observations"):
        _toy([0.0, float("nan")], [0, 0])
    with pytest.raises(ValueError, match="episode order"):
        _toy([0.0, 1.0], [1, 0])
    with pytest.raises(ValueError, match="rows"):
        Demonstrations(**{**_toy([0.0], [0]).__dict__, "actions": np.zeros((2, 1), np.float32)})
    with pytest.raises(ValueError, match="every episode is empty"):
        Demonstrations.from_episodes("toy", [[]], [0])
    with pytest.raises(ValueError, match="num_episodes"):
        collect_demonstrations("wmrl/Lift-v0", 0)
