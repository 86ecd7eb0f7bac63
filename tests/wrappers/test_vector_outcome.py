"""``WorldModelVectorEnv`` on outcome tasks, mirroring gymnasium's own vector-env tests."""

from __future__ import annotations

import multiprocessing
import threading

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import DictInfoToList
from testing_env import (
    ANSWERS,
    BanditEnv,
    BanditWorldModel,
    CallLog,
    GenericTestEnv,
    TextTaskEnv,
    TextWorldModel,
    assert_same,
)

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.env_executors.gym_env import GymEnvExecutor
from wmrl_env.wrappers.vector import ANCHOR_STREAM

PAYOFF = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.0, 0.1, 0.3], [0.4, 0.6, 0.0, 1.0]])
M, G = 8, 4


def make_envs(log=None, world_model=None, fusion=None, fail_action=None, **kwargs):
    return WorldModelVectorEnv(
        lambda: BanditEnv(PAYOFF, noise=0.1, log=log, fail_action=fail_action),
        world_model or BanditWorldModel(PAYOFF, scale=0.5, bias=0.2),
        num_groups=M,
        group_size=G,
        fusion=fusion or RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
        **{"executor": "inline", **kwargs},
    )


@pytest.fixture
def log():
    return CallLog()


@pytest.fixture
def envs(log):
    envs = make_envs(log)
    yield envs
    envs.close()


def test_spaces_and_metadata(envs) -> None:
    assert envs.num_envs == M * G
    assert envs.single_observation_space == gym.spaces.Discrete(3)
    assert envs.single_action_space == gym.spaces.Discrete(4)
    assert envs.observation_space == batch_space(envs.single_observation_space, M * G)
    assert envs.action_space == batch_space(envs.single_action_space, M * G)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.DISABLED


def test_reset_and_step_shapes_and_dtypes(envs) -> None:
    obs, info = envs.reset(seed=1)
    assert obs in envs.observation_space and obs.shape == (M * G,)
    assert info["group_id"].tolist() == np.repeat(np.arange(M), G).tolist()
    assert info["is_anchor"].dtype == bool and info["is_anchor"].sum() == 2 * G
    np.testing.assert_array_equal(info["env_info"]["context"], obs)  # the group's reset info
    obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
    assert obs in envs.observation_space
    assert rewards.shape == (M * G,) and rewards.dtype == np.float64
    assert terminated.dtype == bool and terminated.all()
    assert truncated.dtype == bool and not truncated.any()
    for key in ("wm_score", "calibrated_score", "real_score", "weight", "advantage"):
        assert info[key].shape == (M * G,) and info[key].dtype == np.float64, key
        assert info[f"_{key}"].all()
    assert info["is_anchor"].dtype == bool
    assert set(info["exec_status"]) <= {"ok", "not_executed"}
    for key in ("kappa", "n_pairs", "spearman", "residual_mse", "calibration_fallback"):
        assert info["batch"][key].shape == (M * G,), key


def test_group_members_start_identically(envs) -> None:
    obs, _ = envs.reset(seed=3)
    per_group = obs.reshape(M, G)
    assert (per_group == per_group[:, :1]).all()
    assert len(set(per_group[:, 0].tolist())) > 1  # groups differ from each other


def test_only_anchors_reach_the_real_env(envs, log) -> None:
    obs, _ = envs.reset(seed=0)
    resets_before = log.count("reset")
    actions = envs.action_space.sample()
    _, _, _, _, info = envs.step(actions)
    anchors = np.flatnonzero(info["is_anchor"])
    assert log.count("step") == anchors.size == 2 * G
    assert sorted((c, a) for _, c, a in log.of("step")) == sorted(
        (int(obs[i]), int(actions[i])) for i in anchors
    )
    assert envs.world_model.calls == 1  # one batched call for every env
    assert log.count("reset") - resets_before == anchors.size  # members restart the group seed
    executed = info["exec_status"] == "ok"
    np.testing.assert_array_equal(executed, info["is_anchor"])
    assert np.isnan(info["real_score"][~executed]).all()
    assert np.isfinite(info["real_score"][executed]).all()


def test_rewards_equal_the_fusion_output(envs) -> None:
    twin = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    for seed in range(3):
        contexts, _ = envs.reset(seed=seed)  # each group's context is its gate cluster
        twin.reseed([seed, ANCHOR_STREAM])  # reset(seed) reseeds the env's anchor draw
        twin_anchors = twin.select_anchors(np.repeat(np.arange(M), G))
        _, rewards, _, _, info = envs.step(envs.action_space.sample())
        np.testing.assert_array_equal(twin_anchors, info["is_anchor"])
        out = twin.step(
            info["group_id"],
            info["wm_score"],
            info["real_score"],
            failed=info["exec_status"] == "error",
            wm_valid=info["wm_valid"],
            clusters=contexts.tolist(),
        )
        np.testing.assert_array_equal(rewards, out.rewards)
        np.testing.assert_array_equal(info["advantage"], out.advantages)
        np.testing.assert_array_equal(info["weight"], out.weights)
        np.testing.assert_array_equal(info["calibrated_score"], out.calibrated)
        assert info["batch"]["kappa"][0] == out.kappa


def test_seeding_determinism() -> None:
    runs = []
    for _ in range(2):
        envs = make_envs()
        envs.action_space.seed(7)
        obs, _ = envs.reset(seed=11)
        step = envs.step(envs.action_space.sample())
        obs2, _ = envs.reset()
        runs.append((obs, step, obs2))
        envs.close()
    assert_same(*runs)


def test_round_must_be_reset(envs) -> None:
    with pytest.raises(RuntimeError, match="reset"):
        envs.step(envs.action_space.sample())
    envs.reset(seed=0)
    envs.step(envs.action_space.sample())
    with pytest.raises(RuntimeError, match="never autoresets"):
        envs.step(envs.action_space.sample())
    with pytest.raises(ValueError, match="reset_mask"):
        mask = np.zeros(M * G, dtype=bool)
        mask[0] = True
        envs.reset(options={"reset_mask": mask})
    envs.reset(options={"reset_mask": np.ones(M * G, dtype=bool)})


def test_failed_execution_is_reported_not_raised(log) -> None:
    envs = make_envs(log, fusion=RewardFusion(method="real", seed=0), fail_action=3)
    envs.reset(seed=0)
    actions = np.zeros(M * G, dtype=np.int64)
    actions[1] = 3
    _, rewards, _, _, info = envs.step(actions)
    assert info["exec_status"][1] == "error" and "sandbox broke" in info["exec_message"][1]
    assert (info["exec_status"][np.arange(M * G) != 1] == "ok").all()
    assert np.isnan(rewards[1]) and info["advantage"][1] == 0.0
    assert np.isfinite(np.delete(rewards, 1)).all()
    envs.close()
    envs = make_envs(
        log, fusion=RewardFusion(method="real", seed=0), fail_action=3, failed_reward=-1.0
    )
    envs.reset(seed=0)
    _, rewards, _, _, _ = envs.step(actions)
    assert rewards[1] == -1.0
    envs.close()


def test_invalid_predictions_send_their_group_to_the_real_env(log) -> None:
    world_model = BanditWorldModel(PAYOFF, invalid_actions=[3])
    envs = make_envs(log, world_model=world_model)
    _, info = envs.reset(seed=0)
    planned = info["is_anchor"]
    target = int(np.flatnonzero(~planned)[0])  # an env of a group that is not an anchor
    actions = np.zeros(M * G, dtype=np.int64)
    actions[target] = 3
    _, _, _, _, info = envs.step(actions)
    group = info["group_id"] == info["group_id"][target]
    assert info["is_anchor"][group].all() and not info["wm_valid"][target]
    assert (info["inclusion_probability"][group] == 1.0).all()
    assert info["wm_invalid_reason"][target] == "nan"
    assert log.count("step") == planned.sum() + G
    assert info["batch"]["n_forced_anchor_groups"][0] == 1
    envs.close()


@pytest.mark.parametrize(("method", "executed_groups"), [("real", M), ("wm", 0)])
def test_methods_real_and_wm(log, method, executed_groups) -> None:
    envs = make_envs(log, fusion=RewardFusion(method=method, seed=0))
    envs.reset(seed=0)
    envs.step(envs.action_space.sample())
    assert log.count("step") == executed_groups * G
    envs.close()


def test_out_of_range_scores_are_invalid(log) -> None:
    envs = make_envs(
        log,
        world_model=BanditWorldModel(PAYOFF, bias=5.0),
        score_range=(0, 1),
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
    )
    envs.reset(seed=0)
    _, rewards, _, _, info = envs.step(envs.action_space.sample())
    assert not info["wm_valid"].any() and info["is_anchor"].all()
    assert np.isfinite(rewards).all()
    envs.close()


def test_world_model_learns_from_anchors(log) -> None:
    class Learning(BanditWorldModel):
        def __init__(self, payoff):
            super().__init__(payoff)
            self.seen = []

        def update(self, contexts, actions, real_scores):
            self.seen.append((list(contexts), list(actions), np.asarray(real_scores)))

    world_model = Learning(PAYOFF)
    envs = make_envs(log, world_model=world_model)
    envs.reset(seed=0)
    _, _, _, _, info = envs.step(envs.action_space.sample())
    ((_contexts, _actions, real),) = world_model.seen
    np.testing.assert_array_equal(real, info["real_score"][info["is_anchor"]])
    envs.close()


def test_text_spaces() -> None:
    log = CallLog()
    envs = WorldModelVectorEnv(
        lambda: TextTaskEnv(log),
        TextWorldModel(),
        num_groups=3,
        group_size=2,
        fusion=RewardFusion(method="real", seed=0),
        executor="inline",
    )
    obs, _ = envs.reset(seed=0)
    assert isinstance(obs, tuple) and len(obs) == 6 and obs in envs.observation_space
    answers = tuple(ANSWERS[task] if i % 2 else "?" for i, task in enumerate(obs))
    _, rewards, _, _, info = envs.step(answers)
    assert rewards.tolist() == [0.0, 1.0] * 3
    assert info["wm_score"].tolist() == [0.0, 1.0] * 3
    envs.close()


def test_info_works_with_gymnasium_info_tools(envs) -> None:
    wrapped = DictInfoToList(envs)
    wrapped.reset(seed=0)
    _, _, _, _, infos = wrapped.step(wrapped.action_space.sample())
    assert len(infos) == M * G and "advantage" in infos[0] and "kappa" in infos[0]["batch"]


@pytest.mark.parametrize("backend", ["thread", "process"])
def test_backends_agree_with_inline(backend) -> None:
    results = []
    for name in ("inline", backend):
        envs = make_envs(executor=name, num_workers=2)
        envs.action_space.seed(5)
        envs.reset(seed=2)
        results.append(envs.step(envs.action_space.sample()))
        envs.close()
    assert_same(*results)


def test_close_releases_everything_and_twice_is_fine() -> None:
    envs = make_envs(executor="process", num_workers=2)
    envs.reset(seed=0)
    envs.step(envs.action_space.sample())
    assert multiprocessing.active_children()
    envs.close()
    envs.close()
    assert envs.closed and envs.executor.closed
    assert not multiprocessing.active_children()
    with pytest.raises(RuntimeError, match="closed"):
        envs.reset()


def test_passed_executor_is_owned() -> None:
    executor = GymEnvExecutor(lambda: BanditEnv(PAYOFF), backend="inline")
    envs = make_envs(executor=executor)
    envs.close()
    assert executor.closed


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="num_groups"):
        WorldModelVectorEnv(lambda: BanditEnv(PAYOFF), BanditWorldModel(PAYOFF), num_groups=0)
    with pytest.raises(TypeError, match="predict"):
        WorldModelVectorEnv(lambda: BanditEnv(PAYOFF), object(), executor="inline")
    with pytest.raises(TypeError, match="RewardFusion"):
        WorldModelVectorEnv(lambda: BanditEnv(PAYOFF), BanditWorldModel(PAYOFF), fusion="wmrl")
    with pytest.raises(ValueError, match="score_range"):
        make_envs(score_range=(1.0, 0.0))


def test_thread_executor_runs_anchor_members_concurrently() -> None:
    """Each real step waits until all four members of the group are stepping at once."""
    barrier = threading.Barrier(4, timeout=30)

    def step(env, action):
        barrier.wait()
        return 0, 1.0, True, False, {}

    envs = WorldModelVectorEnv(
        lambda: GenericTestEnv(gym.spaces.Discrete(1), gym.spaces.Discrete(2), step_func=step),
        BanditWorldModel(np.ones((1, 2))),
        num_groups=1,
        group_size=4,
        fusion=RewardFusion(method="real", seed=0),
        executor="thread",
        num_workers=4,
    )
    envs.reset(seed=0)
    _, rewards, _, _, info = envs.step(np.zeros(4, dtype=np.int64))
    envs.close()
    assert (info["exec_status"] == "ok").all() and (rewards == 1.0).all()


def test_same_reset_seed_same_anchors() -> None:
    anchors = []
    for _ in range(2):
        envs = make_envs()
        anchors.append([envs.reset(seed=s)[1]["is_anchor"] for s in (3, 4, 3)])
        envs.close()
    np.testing.assert_array_equal(anchors[0], anchors[1])
    np.testing.assert_array_equal(anchors[0][0], anchors[0][2])


class UncertainBanditModel(BanditWorldModel):
    """Also returns a predictive std: large for context 0, small elsewhere."""

    def predict(self, contexts, actions):
        scores = super().predict(contexts, actions)
        return scores, np.where(np.asarray(contexts) == 0, 0.5, 0.05)


def test_uncertainty_driven_anchors_are_drawn_from_the_prediction(log) -> None:
    from wmrl_env.fusion import uncertainty_priorities

    envs = make_envs(log, world_model=UncertainBanditModel(PAYOFF), anchor_priority="uncertainty")
    twin = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    obs, info = envs.reset(seed=4)
    assert not info["is_anchor"].any()  # drawn at step, once the world model has spoken
    twin.reseed([4, ANCHOR_STREAM])
    actions = envs.action_space.sample()
    _, rewards, _, _, info = envs.step(actions)
    priorities = uncertainty_priorities(info["group_id"], np.where(obs == 0, 0.5, 0.05))
    np.testing.assert_array_equal(
        twin.select_anchors(info["group_id"], priorities), info["is_anchor"]
    )
    np.testing.assert_array_equal(
        np.where(info["is_anchor"], twin.inclusion_probabilities, np.nan),
        info["inclusion_probability"],
    )
    out = twin.step(info["group_id"], info["wm_score"], info["real_score"])
    np.testing.assert_array_equal(rewards, out.rewards)
    assert log.count("step") == info["is_anchor"].sum()
    envs.close()


def test_uncertainty_driven_anchors_need_a_std_and_an_outcome_task(log) -> None:
    envs = make_envs(log, anchor_priority="uncertainty")
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="std"):
        envs.step(envs.action_space.sample())
    envs.close()
    with pytest.raises(ValueError, match="anchor_priority"):
        make_envs(log, anchor_priority="loudest")


def test_the_world_models_std_reaches_the_gate(log) -> None:
    """Issue 23: the vector env passes the prediction's std to the fusion (the gate's
    weighted least squares); before, ``RewardFusion.step`` never saw it."""
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    envs = make_envs(log, world_model=UncertainBanditModel(PAYOFF), fusion=fusion)
    for seed in range(3):
        envs.reset(seed=seed)
        envs.step(envs.action_space.sample())
    pairs_seen = fusion.gate.std_exponent.state_dict()["sums"][0]
    assert pairs_seen > 0  # the anchors' stds were weighed
    envs.close()
