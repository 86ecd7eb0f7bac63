"""The code policy's tokenizer and network, built offline from a corpus and a config.

:func:`train_code_tokenizer` trains a byte-level BPE tokenizer with ``tokenizers`` whose
pieces may span a whole line (the pre-tokenizer splits at newlines and around digits only):
a solution program is about 60 tokens, the recurring lines one token each, and numbers are
written digit by digit, so the policy can compose hyperparameter values it has not seen.
:func:`build_code_model` makes a randomly initialised GPT-2 decoder for it.

Example (needs the ``transformers`` extra)::

    tokenizer = train_code_tokenizer(texts, vocab_size=1024)
    model = build_code_model(tokenizer, hidden_size=128, num_layers=4, num_heads=4, seed=0)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wmrl_env.utils.imports import require

__all__ = ["EOS_TOKEN", "PAD_TOKEN", "build_code_model", "train_code_tokenizer"]

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"


def train_code_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> Any:
    """A ``PreTrainedTokenizerFast`` trained on ``texts`` (EOS ``<|endoftext|>``, PAD
    ``<|pad|>``, left padding for generation); decoding returns the exact text."""
    tokenizers = require("tokenizers", "train_code_tokenizer")
    transformers = require("transformers", "train_code_tokenizer")
    pre = tokenizers.pre_tokenizers
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = pre.Sequence(
        [
            pre.Split("\n", "merged_with_previous"),
            pre.Digits(individual_digits=True),
            pre.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre.ByteLevel.alphabet(),
        max_token_length=96,
        show_progress=False,
    )
    bpe.train_from_iterator(list(texts), trainer=trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN, padding_side="left"
    )


def build_code_model(
    tokenizer: Any,
    *,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    max_positions: int = 192,
    seed: int = 0,
) -> Any:
    """A random ``GPT2LMHeadModel`` for ``tokenizer`` (tied embeddings), its weights drawn
    under ``seed`` without touching torch's global random state."""
    torch = require("torch", "build_code_model")
    transformers = require("transformers", "build_code_model")
    config = transformers.GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=max_positions,
        n_embd=hidden_size,
        n_layer=num_layers,
        n_head=num_heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.GPT2LMHeadModel(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model
