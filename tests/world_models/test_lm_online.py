"""The LM scorer's online learning from anchors and its calibrated std, on a tiny random Qwen2
built offline (``tiny_lm_dir``) and a synthetic task whose truth is learnable: the real score
depends on the function a two-line program calls (``tiny_lm.keyword_task``)."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from scipy.stats import spearmanr

pytestmark = [pytest.mark.transformers, pytest.mark.lora]

TEMPLATE = "{context}\n{artifact}\nScore: "  # short: a random 2-layer model's last position
LEARNING_RATE = 3e-3  # a random tiny model needs a high rate (real models: ~2e-4)
N_TEST = 200
ROUNDS, PER_ROUND = 10, 40  # an update's cost is bounded by its steps, not by its anchors


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: on the shared 2-core machine two threads run 20-50x slower."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_scorer(model_dir: str, holdout_fraction: float = 0.2, **online):
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
    from wmrl_env.world_models.lm.online_lora import OnlineLoraConfig
    from wmrl_env.world_models.lm.prompting import ScorePrompt

    return CausalLMScorer(
        model_dir,
        prompt=ScorePrompt(template=TEMPLATE),
        min_score_mass=0.0,
        holdout_fraction=holdout_fraction,
        online=OnlineLoraConfig(**{"learning_rate": LEARNING_RATE, **online}),
    )


def task(n: int, seed: int):
    from wmrl_env.world_models.lm.tiny_lm import keyword_task

    return keyword_task(n, np.random.default_rng(seed))


@pytest.fixture(scope="module")
def trained(tiny_lm_dir):
    """A scorer before and after ROUNDS updates of PER_ROUND fresh anchors (a fifth held out
    of training to calibrate the std), scored on N_TEST fresh items (never anchors)."""
    scorer = make_scorer(tiny_lm_dir)
    contexts, artifacts, real, level = task(N_TEST, seed=1000)
    before = scorer.predict(contexts, artifacts)
    reports = [scorer.update(*task(PER_ROUND, seed=r)[:3]) for r in range(ROUNDS)]
    after = scorer.predict(contexts, artifacts)
    return scorer, (contexts, artifacts, real, level), before, after, reports


def test_online_updates_learn_a_learnable_task(trained) -> None:
    _, (_, _, real, level), before, after, _ = trained
    rho_before = spearmanr(before.scores, real).statistic
    rho_after = spearmanr(after.scores, real).statistic
    rho_oracle = spearmanr(level, real).statistic  # 0.95: the noise-free levels
    # zero-shot: a random model's scores hardly depend on the prompt (measured |rho| <= 0.02 over
    # model seeds 0-2); between independent rankings of N_TEST items Spearman has sd 0.071
    assert abs(rho_before) < 0.2
    # after ~320 trained anchors (measured 0.92-0.93 over model seeds 0-2; the oracle 0.95):
    # 0.6 lies more than 5 null sd above anything the zero-shot check lets through
    assert rho_after > 0.6 and rho_after > rho_oracle - 0.15
    mse_before = np.mean((before.scores - real) ** 2)
    mse_after = np.mean((after.scores - real) ** 2)
    # a constant at the mean level (0.5) has MSE 0.05 + noise 0.0064: after learning below it
    assert mse_after < 0.5 * mse_before and mse_after < 0.05


def test_each_update_is_bounded_and_reports_its_cost(trained, tiny_lm_dir) -> None:
    scorer, *_, reports = trained
    config = scorer.learner.config
    assert [r.steps for r in reports] == [config.steps] * ROUNDS
    assert all(np.isfinite(r.losses).all() for r in reports)
    # every anchor was trained on or held out for calibration, about a fifth held out
    held = len(scorer.calibration_set)
    assert sum(r.n_pairs for r in reports) + held == ROUNDS * PER_ROUND
    assert 0.1 < held / (ROUNDS * PER_ROUND) < 0.3
    # LoRA on q,k,v,o,gate,up,down: r x (in + out) per matrix, per layer
    hidden, kv, inner, layers = 128, 64, 256, 2
    shapes = [(hidden, hidden), (hidden, kv), (hidden, kv), (hidden, hidden)]
    shapes += [(hidden, inner), (hidden, inner), (inner, hidden)]
    expected = layers * sum(config.rank * (i + o) for i, o in shapes)
    assert reports[-1].trainable_parameters == expected == 32768
    # time bound: a budget spent before the first step still runs exactly one step
    quick = make_scorer(tiny_lm_dir, steps=50, max_seconds=1e-9)
    report = quick.update(*task(8, seed=7)[:3])
    assert report.steps == 1 and len(report.losses) == 1


def test_repeated_anchors_merge_and_the_memory_stays_bounded(tiny_lm_dir) -> None:
    scorer = make_scorer(tiny_lm_dir, holdout_fraction=0.0, memory_size=12, steps=1)
    contexts, artifacts, real, _ = task(8, seed=3)
    scorer.update(contexts, artifacts, real)
    scorer.update(contexts, artifacts, real)  # the same 8 anchors again: merged, not added
    memory = scorer.learner.memory
    assert len(memory) == 8 and memory.counts(list(memory)).tolist() == [2] * 8
    report = scorer.update(*task(10, seed=4)[:3])
    assert len(memory) == 12  # least recently executed evicted
    # one step of 16: 8 of the 10 new anchors, 8 replayed from the 2 older ones left (all)
    assert report.replayed == 2


def test_past_anchors_are_replayed_only_when_asked(tiny_lm_dir) -> None:
    for fraction, expected in ((0.5, [0, 8, 8]), (0.0, [0, 0, 0])):
        scorer = make_scorer(tiny_lm_dir, holdout_fraction=0.0, replay_fraction=fraction, steps=1)
        reports = [scorer.update(*task(20, seed=10 + r)[:3]) for r in range(3)]
        # a batch of 16: half new anchors, half drawn from the memory's older anchors
        assert [r.replayed for r in reports] == expected, fraction


def test_garbage_is_refused_and_changes_nothing(tiny_lm_dir) -> None:
    scorer = make_scorer(tiny_lm_dir, steps=2)
    contexts, artifacts, real, _ = task(6, seed=5)
    scorer.update(contexts, artifacts, real)
    before = scorer.predict(contexts, artifacts)
    state = (len(scorer.learner.memory), len(scorer.std_calibration))
    for bad in ([0.5, np.inf, 0.1, 0.2, 0.3, 0.4], [0.5, 1.5, 0.1, 0.2, 0.3, 0.4], [0.5] * 5):
        with pytest.raises(ValueError):
            scorer.update(contexts, artifacts, np.array(bad))
    with pytest.raises(ValueError):
        scorer.update(contexts, artifacts[:5], real)
    assert scorer.update(contexts, artifacts, np.full(6, np.nan)) is None  # all failed
    assert scorer.update([], [], np.array([])) is None  # empty batch: a no-op
    after = scorer.predict(contexts, artifacts)
    np.testing.assert_array_equal(after.scores, before.scores)
    np.testing.assert_array_equal(after.std, before.std)
    assert (len(scorer.learner.memory), len(scorer.std_calibration)) == state
    # NaN marks a failed execution: only the scored anchors are learned or held out
    held = len(scorer.calibration_set)
    report = scorer.update(contexts, artifacts, np.where(np.arange(6) < 2, np.nan, real))
    assert report.n_pairs + len(scorer.calibration_set) - held == 4


def test_a_diverging_update_is_rolled_back(tiny_lm_dir) -> None:
    scorer = make_scorer(tiny_lm_dir, steps=2)
    contexts, artifacts, real, _ = task(8, seed=6)
    scorer.update(contexts, artifacts, real)
    before = scorer.predict(contexts, artifacts)
    memory = scorer.learner.memory.state_dict()
    # a learning rate of 1e30 moves every LoRA weight by ~1e30 in one Adam step: the
    # activations overflow float32 and the second step's loss is not finite
    for group in scorer.learner._optimizer.param_groups:
        group["lr"] = 1e30
    with pytest.raises(RuntimeError, match="restored"):
        scorer.update(*task(8, seed=8)[:3])
    after = scorer.predict(contexts, artifacts)
    np.testing.assert_array_equal(after.scores, before.scores)
    assert scorer.learner.memory.state_dict()["prompts"] == memory["prompts"]


def test_split_conformal_std_covers_at_the_nominal_rates(trained) -> None:
    from wmrl_env.world_models.conformal_std import ConformalStd

    scorer = trained[0]
    m = n = 400
    kept = scorer.std_calibration, scorer.calibration_set
    scorer.std_calibration = ConformalStd(window=m, floors=kept[0].floors)
    scorer.calibration_set = deque(maxlen=m)
    try:
        claimed = scorer.calibrate(*task(m, seed=2000)[:3])
        contexts, artifacts, real, _ = task(n, seed=3000)
        p = scorer.predict(contexts, artifacts)
    finally:
        scorer.std_calibration, scorer.calibration_set = kept
    covered = [np.mean(np.abs(real - p.scores) <= k * p.std) for k in (1.0, 1.96)]
    for level, (got, nominal, fitted) in enumerate(
        zip(covered, (0.683, 0.95), claimed, strict=True)
    ):
        # calibration and test items are exchangeable: the test coverage differs from the
        # calibration set's by binomial noise of both sets, sd sqrt(p(1-p)(1/n + 1/m)) (0.033
        # at 68 %, 0.015 at 95 %); allow 3 sd
        sd = np.sqrt(nominal * (1 - nominal) * (1 / n + 1 / m))
        assert abs(got - fitted) <= 3 * sd, (level, got, fitted)
        # one scale for two levels cannot fit both exactly unless the residuals are normal
        # relative to the spread; issue 24's target: within 5 points of nominal
        assert abs(fitted - nominal) <= 0.05, (level, fitted)


def test_std_calibrated_by_update_alone_covers_fresh_items(trained) -> None:
    """update() alone: the held-out anchors' residuals under the current model set the std."""
    scorer, (_, _, real, _), _, after, _ = trained
    m = len(scorer.calibration_set)
    assert scorer.std_calibration.fitted and len(scorer.std_calibration) == m
    claimed = scorer.std_calibration.coverage()
    covered = [np.mean(np.abs(real - after.scores) <= k * after.std) for k in (1.0, 1.96)]
    for got, nominal, fitted in zip(covered, (0.683, 0.95), claimed, strict=True):
        # exchangeable held-out anchors and test items: binomial noise of both sets, 3 sd
        sd = np.sqrt(nominal * (1 - nominal) * (1 / N_TEST + 1 / m))
        assert abs(got - fitted) <= 3 * sd, (got, fitted, m)
        assert abs(fitted - nominal) <= 0.05 + 1 / m, (fitted, m)  # one fitted scale, m pairs


def test_online_state_survives_save_and_load(trained, tmp_path) -> None:
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer

    scorer, (contexts, artifacts, _, _), _, after, _ = trained
    scorer.save(tmp_path / "scorer")
    loaded = CausalLMScorer.load(tmp_path / "scorer", min_score_mass=0.0)
    again = loaded.predict(contexts, artifacts)
    np.testing.assert_allclose(again.scores, after.scores, atol=1e-6)
    np.testing.assert_allclose(again.std, after.std, atol=1e-6)
    assert len(loaded.learner.memory) == len(scorer.learner.memory)
    assert list(loaded.calibration_set) == list(scorer.calibration_set)
    assert loaded.learner.config == scorer.learner.config
    report = loaded.update(*task(8, seed=9)[:3])  # the loaded adapter keeps learning
    assert report.steps == loaded.learner.config.steps
    assert not np.allclose(loaded.predict(contexts, artifacts).scores, after.scores)


def test_vllm_scorer_refuses_a_trainer_of_another_prompt(tiny_lm_dir) -> None:
    from wmrl_env.world_models.lm.vllm_backend import VLLMScorer

    trainer = make_scorer(tiny_lm_dir)  # TEMPLATE, not the default prompt
    with pytest.raises(ValueError, match="same prompt"):
        VLLMScorer(tiny_lm_dir, trainer=trainer)  # checked before vLLM is needed


def test_state_dict_resumes_learning_exactly(tiny_lm_dir) -> None:
    """What a training checkpoint needs: adapters, optimizer moments, memory, draws and
    calibration restored into a fresh scorer continue bit for bit."""
    first, second = task(24, seed=11)[:3], task(24, seed=12)[:3]
    contexts, artifacts, _, _ = task(10, seed=13)
    original = make_scorer(tiny_lm_dir, holdout_fraction=0.5)
    fresh = make_scorer(tiny_lm_dir, holdout_fraction=0.5)
    assert fresh.state_dict()["adapters"] is None  # nothing learned yet
    original.update(*first)
    state = original.state_dict()
    original.update(*second)
    expected = original.predict(contexts, artifacts)
    fresh.load_state_dict(state)
    fresh.update(*second)
    got = fresh.predict(contexts, artifacts)
    np.testing.assert_array_equal(got.scores, expected.scores)
    np.testing.assert_array_equal(got.std, expected.std)
