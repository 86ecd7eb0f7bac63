"""The ensemble dynamics world model and the adapter for a user's own torch world model."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.testing import DynamicsWorldModelContract

pytestmark = [pytest.mark.torch, pytest.mark.slow]


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny matrices: threads only add contention on a shared 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def linear_system(n: int, seed: int, scale: float = 1.0, shift: float = 0.0):
    """s' = s + A s * 0.1 + B a, r = s0 + a0, terminated when s0 > 1 (ground truth known)."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1.5, 1.5, (n, 4))
    act = rng.uniform(-1, 1, (n, 2))
    a = np.array([[0, 1, 0, 0], [-1, 0, 0, 0], [0, 0, -0.5, 0], [0, 0, 0, 0.2]])
    b = np.array([[0.3, 0], [0, 0.3], [0.1, 0.1], [0, -0.2]])
    nxt = obs + 0.1 * obs @ a.T + act @ b.T
    rewards = obs[:, 0] + act[:, 0]
    terms = obs[:, 0] > 1.0
    return obs * scale + shift, act, nxt * scale + shift, rewards, terms


def make_model(**overrides):
    from wmrl_env.world_models.dynamics.ensemble import EnsembleConfig, EnsembleDynamicsModel

    settings = {"ensemble_size": 4, "hidden_sizes": (64, 64), "max_epochs": 150, "seed": 0}
    return EnsembleDynamicsModel(4, 2, EnsembleConfig(**{**settings, **overrides}))


@pytest.fixture(scope="module")
def fitted():
    model = make_model()
    report = model.fit(*linear_system(2000, seed=0))
    return model, report


class TestEnsembleContract(DynamicsWorldModelContract):
    def make_world_model(self):
        model = make_model(max_epochs=20)
        model.fit(*linear_system(300, seed=1))
        return model

    def make_batch(self, n):
        obs, act, *_ = linear_system(n, seed=2)
        return obs.astype(np.float32), act


def test_learns_a_known_system_far_better_than_no_change(fitted) -> None:
    model, report = fitted
    obs, act, nxt, rewards, terms = linear_system(500, seed=99)
    step = model.predict_step(obs, act)
    model_error = np.mean((step.next_observations - nxt) ** 2)
    no_change_error = np.mean((obs - nxt) ** 2)
    assert model_error < 0.02 * no_change_error, (model_error, no_change_error)
    assert np.mean((step.rewards - rewards) ** 2) < 0.01 * np.var(rewards)
    assert np.mean(step.terminations == terms) > 0.95
    assert report.validation_size == 400 and report.train_size == 1600
    assert np.isfinite(report.validation_mse) and report.validation_mse < 0.05


def test_normalisation_makes_units_irrelevant(fitted) -> None:
    """The same system in millimetres around 10 km is learned just as well (relative error)."""
    model, _ = fitted
    scaled = make_model()
    scaled.fit(*linear_system(2000, seed=0, scale=1000.0, shift=1e4))
    obs, act, nxt, _, _ = linear_system(500, seed=99, scale=1000.0, shift=1e4)
    relative = np.mean((scaled.predict_step(obs, act).next_observations - nxt) ** 2) / 1e6
    base_obs, base_act, base_nxt, _, _ = linear_system(500, seed=99)
    base = np.mean((model.predict_step(base_obs, base_act).next_observations - base_nxt) ** 2)
    assert relative < 3 * base + 1e-4


def test_early_stopping_on_held_out_data() -> None:
    """With noisy targets and few samples, held-out loss stops improving long before the cap."""
    obs, act, nxt, rewards, terms = linear_system(200, seed=3)
    noisy = nxt + np.random.default_rng(3).normal(0, 0.3, nxt.shape)
    model = make_model(max_epochs=1000, patience=5)
    report = model.fit(obs, act, noisy, rewards, terms)
    assert report.stopped_early and report.epochs < 300, report
    assert report.validation_size == 40


def test_disagreement_grows_off_the_training_data(fitted) -> None:
    model, _ = fitted
    obs, act, *_ = linear_system(200, seed=5)
    inside = model.predict_step(obs, act).std
    outside = model.predict_step(obs * 6.0, act).std
    assert np.median(outside) > 5 * np.median(inside), (np.median(outside), np.median(inside))


def test_rewards_stay_in_the_range_of_the_data(fitted) -> None:
    model, _ = fitted
    obs, act, *_ = linear_system(100, seed=12)
    far = model.predict_step(obs * 50.0, act * 50.0).rewards
    train_rewards = linear_system(2000, seed=0)[3]
    assert far.min() >= train_rewards.min() and far.max() <= train_rewards.max()


def test_imagine_chains_steps_and_terminations_stick(fitted) -> None:
    model, _ = fitted
    obs, _, *_ = linear_system(6, seed=7)
    plan = np.random.default_rng(0).uniform(-1, 1, (6, 5, 2))
    rollout = model.imagine(obs, plan)
    assert rollout.observations.shape == (6, 6, 4) and rollout.rewards.shape == (6, 5)
    first = model.predict_step(obs, plan[:, 0])
    np.testing.assert_allclose(rollout.observations[:, 1], first.next_observations, rtol=1e-6)
    later = rollout.terminations[:, 1:] | ~rollout.terminations[:, :-1]
    assert later.all(), "a termination must stay set"
    assert (rollout.rewards[:, 1:][rollout.terminations[:, :-1]] == 0).all()
    with pytest.raises(ValueError, match="horizon"):
        model.imagine(obs, lambda o: np.zeros((len(o), 2)))


def test_update_learns_from_added_transitions_and_persists(fitted) -> None:
    model = make_model(max_epochs=40)
    first = linear_system(300, seed=8)
    model.update(*first)
    model.update(*linear_system(300, seed=9))
    assert len(model.buffer) == 600
    clone = make_model()
    clone.load_state_dict(model.state_dict())
    obs, act, *_ = linear_system(5, seed=10)
    np.testing.assert_array_equal(
        clone.predict_step(obs, act).next_observations,
        model.predict_step(obs, act).next_observations,
    )


def test_bad_inputs_are_rejected(fitted) -> None:
    model, _ = fitted
    obs, act, nxt, rew, term = linear_system(20, seed=11)
    with pytest.raises(RuntimeError, match="fit"):
        make_model().predict_step(obs, act)
    with pytest.raises(ValueError, match="20 observations but"):
        model.fit(obs, act[:10], nxt, rew, term)
    with pytest.raises(ValueError, match="width"):
        model.fit(obs[:, :3], act, nxt[:, :3], rew, term)
    with pytest.raises(ValueError, match="NaN"):
        model.fit(obs, act, np.full_like(nxt, np.nan), rew, term)
    with pytest.raises(ValueError, match="shape"):
        model.predict_step(obs[:, :2], act)
    from wmrl_env.world_models.dynamics.ensemble import EnsembleConfig

    with pytest.raises(ValueError, match="validation_fraction"):
        EnsembleConfig(validation_fraction=1.0)


@pytest.mark.robosuite
@pytest.mark.slow
def test_learns_real_robosuite_dynamics() -> None:
    """Fit on Lift episodes (random actions held for 10 steps); on a held-out episode the
    one-step prediction beats "nothing changes" overall and explains part of the change of the
    median state dimension. (A few hundred transitions of a 60-dimensional state: a weak model,
    but a real one; docs/robotics.md shows error vs horizon with more data.)"""
    from wmrl_env.envs.robosuite import RobosuiteEnv

    env = RobosuiteEnv("Lift", horizon=60)
    rng = np.random.default_rng(0)
    episodes = []
    try:
        for seed in range(5):
            obs, _ = env.reset(seed=seed)
            rows = []
            for t in range(60):
                if t % 10 == 0:
                    action = rng.uniform(-1, 1, 7).astype(np.float32)
                nxt, reward, terminated, _, _ = env.step(action)
                rows.append((obs, action, nxt, reward, terminated))
                obs = nxt
            episodes.append([np.array(column) for column in zip(*rows, strict=True)])
    finally:
        env.close()
    train = [np.concatenate(parts) for parts in zip(*episodes[:4], strict=True)]
    held_out = episodes[4]
    from wmrl_env.world_models.dynamics.ensemble import EnsembleConfig, EnsembleDynamicsModel

    model = EnsembleDynamicsModel(
        train[0].shape[1],
        7,
        EnsembleConfig(ensemble_size=3, hidden_sizes=(128, 128), max_epochs=150, seed=0),
    )
    model.fit(*train)
    predicted = model.predict_step(held_out[0], held_out[1]).next_observations
    change, predicted_change = held_out[2] - held_out[0], predicted - held_out[0]
    assert np.mean((change - predicted_change) ** 2) < np.mean(change**2)
    spread = ((change - change.mean(axis=0)) ** 2).sum(axis=0)
    moving = spread > 1e-10
    r2 = 1 - ((change - predicted_change) ** 2).sum(axis=0)[moving] / spread[moving]
    assert np.median(r2) > 0.0, np.median(r2)


class TinyImageWorldModel:
    """A user's image world model: conv net over uint8 frames, predicting frame and reward."""

    @staticmethod
    def build():
        import torch

        class Net(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                torch.manual_seed(0)
                self.conv = torch.nn.Conv2d(3 + 2, 3, 3, padding=1)
                self.reward = torch.nn.Linear(3, 1)

            def forward(self, frames, actions):
                x = frames.permute(0, 3, 1, 2).float() / 255.0
                a = actions[:, :, None, None].expand(-1, -1, *x.shape[2:])
                delta = torch.tanh(self.conv(torch.cat([x, a], dim=1)))
                nxt = ((x + 0.1 * delta).clamp(0, 1) * 255.0).permute(0, 2, 3, 1)
                pooled = x.mean(dim=(2, 3))
                return {
                    "next_observations": nxt,
                    "rewards": self.reward(pooled).squeeze(-1),
                    "termination_logits": pooled.sum(-1) - 10.0,
                }

        return Net()


class TestImageAdapterContract(DynamicsWorldModelContract):
    def make_world_model(self):
        from wmrl_env.world_models.dynamics.ensemble import TorchDynamicsAdapter

        return TorchDynamicsAdapter(TinyImageWorldModel.build(), batch_size=2)

    def make_batch(self, n):
        rng = np.random.default_rng(n)
        frames = rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8)
        return frames, rng.uniform(-1, 1, (n, 2)).astype(np.float32)

    def test_chunks_and_dtypes(self, world_model) -> None:
        frames, actions = self.make_batch(5)
        step = world_model.predict_step(frames, actions)
        assert step.next_observations.dtype == np.uint8
        assert step.next_observations.shape == frames.shape
        assert not step.terminations.any()
        whole = type(world_model)(world_model.module).predict_step(frames, actions)
        np.testing.assert_allclose(step.rewards, whole.rewards, rtol=1e-5)

    def test_rejects_what_is_not_a_module(self) -> None:
        from wmrl_env.world_models.dynamics.ensemble import TorchDynamicsAdapter

        with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
            TorchDynamicsAdapter(lambda o, a: (o, a))
