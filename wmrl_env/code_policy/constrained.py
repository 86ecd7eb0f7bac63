"""Decoding constrained to a set of texts: a token trie, for an LM that must write one of them.

:class:`TokenTrie` holds the token ids of every allowed completion (each ending in EOS); a
generated prefix's :meth:`~TokenTrie.allowed` next tokens are what ``generate``'s
``prefix_allowed_tokens_fn`` returns, and the same sets renormalise the log-probabilities the
policy gradient uses, so the sampled distribution and the trained one are one.
:func:`grid_trie` builds it for the 72 grid programs of a task kind and ``STOP``: the programs
the execution table holds, so every program the LM writes is a real recorded run.

Example:
    >>> trie = TokenTrie([[5, 6, 0], [5, 7, 0], [9, 0]])
    >>> trie.allowed([]), trie.allowed([5]), trie.allowed([5, 7]), trie.allowed([5, 7, 0])
    ([5, 9], [6, 7], [0], [])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["TokenTrie", "grid_trie"]


class TokenTrie:
    """The prefixes of a set of token sequences, and which token may follow each."""

    def __init__(self, sequences: Sequence[Sequence[int]]) -> None:
        if not sequences:
            raise ValueError("a trie needs at least one sequence")
        self._root: dict[int, Any] = {}
        for sequence in sequences:
            node = self._root
            for token in sequence:
                node = node.setdefault(int(token), {})

    def allowed(self, prefix: Sequence[int]) -> list[int]:
        """The tokens that may follow ``prefix`` (empty: complete, or not a prefix)."""
        node = self._root
        for token in prefix:
            node = node.get(int(token))
            if node is None:
                return []
        return sorted(node)


def grid_trie(tokenizer: Any, kind: str, stop: str = "STOP") -> TokenTrie:
    """The trie of the 72 grid programs of ``kind`` and ``stop``, each followed by EOS."""
    from wmrl_env.envs.ml_tasks.programs import all_programs, render_program

    texts = [render_program(spec, kind) for spec in all_programs()] + [stop]  # type: ignore[arg-type]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return TokenTrie([[*row, tokenizer.eos_token_id] for row in ids])
