"""CausalLMScorer and LoRA fine-tuning on a tiny random Qwen2 model built offline."""

from __future__ import annotations

import functools
import tempfile

import numpy as np
import pytest

from wmrl_env.testing import WorldModelContract

pytestmark = pytest.mark.transformers

CONTEXTS = ["Sort a list.", "Sum the squares of the numbers in a long list " * 6, "Reverse."]
ARTIFACTS = ["def solve(x): return sorted(x)", "pass", "return s.split()[::-1]"]


@functools.cache
def model_dir() -> str:
    from wmrl_env.world_models.lm.tiny_lm import build_tiny_causal_lm

    return str(build_tiny_causal_lm(tempfile.mkdtemp(prefix="wmrl-tiny-"), seed=0))


def scorer(**kwargs):
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer

    return CausalLMScorer(model_dir(), **{"min_score_mass": 0.0, **kwargs})


class TestCausalLMScorerContract(WorldModelContract):
    score_range = (0.0, 1.0)
    batch_tolerance = 1e-5  # left padding with explicit position ids: float noise only

    def make_world_model(self):
        return scorer(batch_size=4)

    def make_inputs(self, n):
        rng = np.random.default_rng(n)
        picks = rng.integers(len(CONTEXTS), size=n)
        return [CONTEXTS[i] for i in picks], [ARTIFACTS[i] for i in picks], rng.random(n)

    @pytest.mark.lora  # online learning trains LoRA adapters (peft)
    def test_update_if_supported(self) -> None:
        super().test_update_if_supported()


def test_expectation_is_the_mean_of_the_score_token_distribution() -> None:
    model = scorer()
    prediction = model.predict(CONTEXTS, ARTIFACTS)
    log_probs = model.score_log_probs(model.prompt.render_batch(CONTEXTS, ARTIFACTS))
    probs = np.exp(log_probs) / np.exp(log_probs).sum(axis=1, keepdims=True)
    values = model.prompt.bins.values
    np.testing.assert_allclose(prediction.scores, probs @ values, rtol=1e-9)
    spread = np.sqrt(probs @ values**2 - (probs @ values) ** 2)
    np.testing.assert_allclose(prediction.std, spread, rtol=1e-6)


def test_truncation_keeps_the_question_at_the_end() -> None:
    short = scorer(max_length=24)
    prompt = short.prompt.render_batch(CONTEXTS[1:2], ARTIFACTS[1:2])
    batch = short.encode(prompt)
    assert batch["input_ids"].shape[1] == 24
    assert short.tokenizer.decode(batch["input_ids"][0]).endswith("Score: ")
    assert short.predict(CONTEXTS[1:2], ARTIFACTS[1:2]).valid.all()


def test_low_score_mass_is_flagged_not_trusted() -> None:
    # a random model spreads its mass over the whole vocabulary: far below 50 % on digits
    prediction = scorer(min_score_mass=0.5).predict(CONTEXTS, ARTIFACTS)
    assert not prediction.valid.any()
    assert prediction.reasons == ["low_score_mass"] * 3


def test_generate_mode_flags_what_it_cannot_parse() -> None:
    model = scorer(mode="generate", max_new_tokens=3)
    texts = model.generate(model.prompt.render_batch(CONTEXTS, ARTIFACTS))
    prediction = model.predict(CONTEXTS, ARTIFACTS)
    expected_scores, expected_reasons = model.prompt.bins.parse(texts)
    assert prediction.reasons == expected_reasons
    assert prediction.valid.tolist() == [r == "" for r in expected_reasons]
    np.testing.assert_allclose(prediction.scores, expected_scores)


def test_multi_token_score_vocabulary_is_refused() -> None:
    from wmrl_env.world_models.lm.prompting import ScorePrompt
    from wmrl_env.world_models.lm.score_bins import ScoreBins

    prompt = ScorePrompt(bins=ScoreBins(tokens=("10", "20", "30")))
    with pytest.raises(ValueError, match="single tokens"):
        scorer(prompt=prompt)


@pytest.mark.slow
def test_lora_fine_tuning_lowers_the_loss_and_learns_the_scores(tmp_path) -> None:
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
    from wmrl_env.world_models.lm.lora import LoraTrainingConfig, finetune_lora, score_loss
    from wmrl_env.world_models.lm.prompting import ScorePrompt

    short = ["Sort a list.", "Sum the squares.", "Reverse."]
    good = np.arange(32) % 2 == 0
    contexts = [short[i % 3] for i in range(32)]
    artifacts = [ARTIFACTS[0] if g else "pass" for g in good]
    scores = good.astype(float)
    # a short prompt: a random 2-layer model's last position hardly sees a long one
    model = scorer(prompt=ScorePrompt(template="{context}\n{artifact}\nScore: "))
    # 5 epochs: with transformers 5.25 / peft 0.21.2 three left the margin below 0.15 (0.05;
    # the ranking was right), five give 0.43
    config = LoraTrainingConfig(learning_rate=2e-2, epochs=5, batch_size=8, eval_fraction=0.25)
    prompts = model.prompt.render_batch(short, ARTIFACTS)
    mass_before = np.exp(model.score_log_probs(prompts)).sum(axis=1)
    report = finetune_lora(model, contexts, artifacts, scores, config)
    assert report.n_train == 24 and report.n_eval == 8
    assert report.eval_loss_after < report.eval_loss_before - 1.0
    assert np.mean(report.losses[-3:]) < np.mean(report.losses[:3])
    # the batched loss (left padding) is the mean of the one-by-one losses
    one_by_one = [
        score_loss(model, [c], [a], [s])
        for c, a, s in zip(CONTEXTS, ARTIFACTS, scores[:3], strict=True)
    ]
    batched = score_loss(model, CONTEXTS, ARTIFACTS, scores[:3])
    assert batched == pytest.approx(np.mean(one_by_one), rel=1e-4)
    # the tuned model puts more mass on score tokens and ranks the two kinds of artifact
    prediction = model.predict(short, [ARTIFACTS[0], "pass", "pass"])
    assert prediction.scores[0] > prediction.scores[1:].max() + 0.15
    assert (np.exp(model.score_log_probs(prompts)).sum(axis=1) > 1.5 * mass_before).all()

    # adapter round trip, then merged weights: the same predictions without peft
    expected = model.predict(CONTEXTS, ARTIFACTS).scores
    model.save(tmp_path / "adapter")
    reloaded = CausalLMScorer.load(tmp_path / "adapter")
    np.testing.assert_allclose(reloaded.predict(CONTEXTS, ARTIFACTS).scores, expected, atol=1e-6)
    model.save(tmp_path / "merged", merge=True)
    merged = CausalLMScorer.load(tmp_path / "merged")
    assert not hasattr(merged.model, "peft_config")
    np.testing.assert_allclose(merged.predict(CONTEXTS, ARTIFACTS).scores, expected, atol=1e-5)


def test_fine_tuning_refuses_bad_scores_before_training() -> None:
    from wmrl_env.world_models.lm.lora import finetune_lora

    model = scorer()
    with pytest.raises(ValueError, match="outside"):
        finetune_lora(model, CONTEXTS, ARTIFACTS, np.array([0.5, 1.5, np.nan]))
    assert not hasattr(model.model, "peft_config")


def test_status_probabilities_are_the_status_tokens_next_token_distribution() -> None:
    """Constrained status tokens: the contract's status probabilities are the model's
    next-token distribution after the status question, renormalised over the four status
    tokens (computed here one prompt at a time, without padding); a program that does not
    compile is the pre-gate's, exactly."""
    import torch

    from wmrl_env.world_models.outcomes import STATUSES

    model = scorer(batch_size=2)
    outcome = model.predict_outcomes(CONTEXTS, ARTIFACTS, failure_score=0.0)
    ids = model.status_token_ids()
    columns = [STATUSES.index(status) for status in model.status_prompt.statuses]
    assert outcome.known.tolist() == [False, False, True]  # 'return' outside a function
    assert outcome.status()[2] == "does_not_parse"
    for i in range(2):
        text = model.status_prompt.render_batch([CONTEXTS[i]], [ARTIFACTS[i]])[0]
        encoded = model.tokenizer(text, add_special_tokens=False, return_tensors="pt")
        with torch.inference_mode():
            logits = model.model(input_ids=encoded["input_ids"]).logits[0, -1]
        expected = torch.softmax(logits[ids].double(), dim=0).numpy()
        np.testing.assert_allclose(outcome.status_probs[i, columns], expected, rtol=1e-4)
    prediction = model.predict(CONTEXTS[:2], ARTIFACTS[:2])
    np.testing.assert_allclose(outcome.score[:2], prediction.scores)


def test_status_tokens_that_are_not_one_token_are_refused() -> None:
    from wmrl_env.world_models.lm.prompting import StatusPrompt

    model = scorer()
    tokens = (("ok", "Zyzzyva"), ("crashed", "C"), ("timeout", "T"), ("invalid_output", "I"))
    model.status_prompt = StatusPrompt(tokens=tokens)
    with pytest.raises(ValueError, match="single tokens"):
        model.predict_outcomes(CONTEXTS[:1], ARTIFACTS[:1])
    with pytest.raises(ValueError, match="each of"):
        StatusPrompt(tokens=(("ok", "O"), ("crashed", "C")))
