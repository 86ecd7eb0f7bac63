"""The dense progress reward in a real env: its return telescopes to the fused episode score,
snapshots carry the episode's record, and a round ends with the on-policy check, the update
and the recalibration."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from wmrl_env.robotics.dense_reward import DenseProgressReward, ProgressReward
from wmrl_env.robotics.progress import ProgressModel


class Line(gym.Env):
    """x moves by the action; success (reward 1, the end) at x >= 1; 10 steps at most."""

    observation_space = gym.spaces.Box(-5, 5, (2,), np.float64)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = 0.0, 0
        return self._obs(), {}

    def _obs(self):
        return np.array([self.x, 0.0])

    def step(self, action):
        self.x, self.t = self.x + float(action[0]), self.t + 1
        success = self.x >= 1.0
        return (
            self._obs(),
            float(success),
            success,
            self.t >= 10 and not success,
            {"success": success},
        )

    def get_snapshot(self):
        return {"x": self.x, "t": self.t}

    def restore_snapshot(self, snapshot):
        self.x, self.t = snapshot["x"], snapshot["t"]
        return self._obs(), {}


def _model() -> ProgressModel:
    episodes = []
    for end, ok in [(1.0, True), (0.4, False)] * 10:
        states = np.stack([np.linspace(0, end, 6), np.zeros(6)], axis=1)
        episodes.append((states, ok))
    return ProgressModel(seed=0).pretrain(episodes)


def _play(env: gym.Env, actions: list[float]) -> tuple[float, bool]:
    env.reset(seed=0)
    total = 0.0
    for a in actions:
        _, reward, terminated, truncated, info = env.step(np.array([a]))
        total += reward
        if terminated or truncated:
            return total, info["success"]
    return total, False


@pytest.mark.parametrize("weight", [0.5, 1.0])
def test_the_return_telescopes_to_the_fused_score(weight: float) -> None:
    scorer = ProgressReward(_model(), dense_weight=weight, calibrate=False)
    env = DenseProgressReward(Line(), scorer)
    total, success = _play(env, [0.2] * 5 + [0.0] * 5)  # reaches 1.0 at step 5
    states = np.array([[0.2 * k, 0.0] for k in range(6)])
    made = scorer.progress(states[-1:])[0] - scorer.progress(states[:1])[0]
    assert success
    assert total == pytest.approx((1 - weight) * 1.0 + weight * made, abs=1e-12)
    assert len(scorer.episodes) == 1 and scorer.episodes[0][1]


def test_a_restored_snapshot_continues_its_own_episode() -> None:
    scorer = ProgressReward(_model(), calibrate=False, update=False)
    env = DenseProgressReward(Line(), scorer)
    env.reset(seed=0)
    env.step(np.array([0.3]))
    parked = env.get_snapshot()
    rest = [env.step(np.array([0.3]))[1] for _ in range(3)]  # 0.6, 0.9, 1.2: success
    env.reset(seed=0)
    env.step(np.array([-0.5]))  # another episode in between
    env.restore_snapshot(parked)
    again = [env.step(np.array([0.3]))[1] for _ in range(3)]
    assert again == rest
    with pytest.raises(ValueError, match="snapshot"):
        env.restore_snapshot({"x": 0.0})


def test_end_round_checks_then_updates_and_calibrates() -> None:
    scorer = ProgressReward(_model(), dense_weight=0.5, calibrate=True, min_pairs=4)
    env = DenseProgressReward(Line(), scorer)
    for k in range(8):  # successes and failures from the same start
        _play(env, [0.25] * 4 if k % 2 else [0.05] * 10)
    before = len(scorer.model.states)
    check = scorer.end_round()
    assert check["episodes"] == 8 and check["successes"] == 4
    assert check["within_group_auc"] == 1.0  # one start: every pair is within it
    # the progress labels' coverage by the std, measured before the model saw the episodes
    assert 0.0 <= check["progress_coverage"] <= 1.0 and check["progress_rmse"] > 0
    assert check["calibration"]["calibration"] == "affine" and check["calibration"]["slope"] > 0
    assert len(scorer.model.states) == before + 8 and not scorer.episodes
    assert check["progress_episodes"] == before + 8
    assert scorer.end_round() is None
    # the calibration maps progress made to the success scale: increasing, from about 0
    # (the failures' progress) to about 1 (the successes'; the calibrator's tie-break may
    # step a little outside)
    values = [scorer.calibrated(p) for p in (0.0, 0.5, 1.0)]
    assert values == sorted(values) and values[0] < 0.05 and values[-1] > 0.95
    with pytest.raises(ValueError, match="pretrained"):
        ProgressReward(ProgressModel())
