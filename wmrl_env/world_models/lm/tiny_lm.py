"""Build a tiny random causal language model and its tokenizer offline, in a directory.

For tests, examples and benchmarks of the language-model backends on machines without a
model hub: a byte-level BPE tokenizer trained locally with ``tokenizers`` (digits split one
per token, like Qwen's) and a Qwen2 model with random weights, both saved with
``save_pretrained`` so every backend loads them exactly like a downloaded model; and
:func:`keyword_task`, a synthetic scoring task such a model can learn online.

Example (needs the ``transformers`` extra)::

    path = build_tiny_causal_lm("/tmp/tiny-lm", seed=0)
    scorer = CausalLMScorer(path)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from wmrl_env.utils.imports import require

__all__ = [
    "KEYWORD_LEVELS",
    "TINY_CORPUS",
    "build_tiny_causal_lm",
    "build_tiny_tokenizer",
    "keyword_task",
]

#: the function a synthetic program calls -> the mean real score it earns
KEYWORD_LEVELS: dict[str, float] = {"sorted": 0.8, "reversed": 0.6, "max": 0.4, "print": 0.2}

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"

#: text the tokenizer is trained on: prompt words, code, digits
TINY_CORPUS: tuple[str, ...] = (
    "Task:\nWrite a function that sorts a list of integers.\n",
    "Candidate solution:\ndef solve(x):\n    return sorted(x)\n",
    "How well will this solution score when executed? Answer with one digit.\nScore: 7",
    "def solve(s):\n    return ' '.join(reversed(s.split()))\n",
    "import numpy as np\nfrom sklearn.linear_model import Ridge\nmodel = Ridge(alpha=1.0)\n",
    "for i in range(10):\n    print(i, i * i)\n",
    "0 1 2 3 4 5 6 7 8 9 10 0.5 0.25 1e-3",
    "The answer is correct. The program fails. The tests pass. Reward score value.",
)


def build_tiny_tokenizer(
    path: str | os.PathLike[str], corpus: Iterable[str] = TINY_CORPUS, vocab_size: int = 512
):
    """Train a byte-level BPE tokenizer on ``corpus`` and save it to ``path``.

    Returns the ``PreTrainedTokenizerFast`` (EOS ``<|endoftext|>``, PAD ``<|pad|>``).
    """
    tokenizers = require("tokenizers", "build_tiny_tokenizer")
    transformers = require("transformers", "build_tiny_tokenizer")
    pre = tokenizers.pre_tokenizers
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = pre.Sequence(
        [pre.Digits(individual_digits=True), pre.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(corpus), trainer=trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN
    )
    tokenizer.save_pretrained(str(path))
    return tokenizer


def build_tiny_causal_lm(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 2,
    corpus: Iterable[str] = TINY_CORPUS,
) -> Path:
    """Save a random Qwen2 causal LM and its tokenizer to ``path``; return the path.

    The weights are drawn under ``seed`` without touching torch's global random state. The
    default head width (``hidden_size / num_heads`` = 64) is one that vLLM's CPU attention
    kernels support.
    """
    torch = require("torch", "build_tiny_causal_lm")
    transformers = require("transformers", "build_tiny_causal_lm")
    path = Path(path)
    tokenizer = build_tiny_tokenizer(path, corpus)
    config = transformers.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(str(path))
    return path


def keyword_task(
    n: int,
    rng: np.random.Generator,
    noise: float = 0.08,
    keywords: Sequence[str] | None = None,
) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """``n`` synthetic items whose real score is learnable from one token of the prompt.

    Each artifact is a two-line program (a random constant, then a call of one of
    :data:`KEYWORD_LEVELS`, or of ``keywords`` among them), each context a random task
    number; the real score is the keyword's level plus Gaussian noise of sd ``noise``,
    clipped to [0, 1]. Returns contexts, artifacts, real scores and the noise-free levels
    (the oracle's prediction).

    >>> contexts, artifacts, real, level = keyword_task(3, np.random.default_rng(0))
    >>> artifacts[0].splitlines()[1], float(level[0])
    ('return print(x)', 0.2)
    """
    names = list(keywords if keywords is not None else KEYWORD_LEVELS)
    picks = rng.integers(len(names), size=n)
    level = np.array([KEYWORD_LEVELS[names[k]] for k in picks])
    contexts = [f"Task {rng.integers(100)}" for _ in range(n)]
    artifacts = [f"x = {rng.integers(1000)}\nreturn {names[k]}(x)" for k in picks]
    real = np.clip(level + rng.normal(0.0, noise, size=n), 0.0, 1.0)
    return contexts, artifacts, real, level
