"""The code LM as a multi-turn reviser: behaviour-cloned on revision pairs, post-trained by GRPO.

:func:`make_lm_reviser` trains a BPE tokenizer and a small GPT-2 from a config on
:func:`~wmrl_env.code_policy.revision.revision_pairs` (real runs of the ``wm`` and ``train``
tasks: a failing program and its real report -> a program that runs, a program that scored ->
a neighbour or ``STOP``), cached on disk like
:func:`~wmrl_env.code_policy.behaviour_cloning.make_code_policy`. :class:`LMReviser` reads
each env's last observation (a task description, or a real or simulated turn report) and the
program it answered, writes the next program (or ``STOP``), and scores its own completions
(:meth:`LMReviser.log_probs`) for the policy gradient; :meth:`LMReviser.update` takes one GRPO
step from one round's per-episode advantages (the fusion's, from ``info["advantage"]``).

Example (needs the ``transformers`` extra)::

    path = make_lm_reviser(seed=0, cache_dir="runs/lm_reviser")
    reviser = LMReviser.load(path, seed=0)
    actions, turns = reviser.act([get_task("wine").description], [None])
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.code_policy.behaviour_cloning import TRAINING_LOG, clone_programs
from wmrl_env.code_policy.constrained import TokenTrie, grid_trie
from wmrl_env.code_policy.model import build_code_model, train_code_tokenizer
from wmrl_env.code_policy.revision import revision_pairs, revision_prompt, task_of_observation
from wmrl_env.utils.imports import require

__all__ = ["LMReviser", "ReviserRecipe", "Turn", "make_lm_reviser"]


@dataclass(frozen=True)
class ReviserRecipe:
    """How the LM reviser is made (see :class:`~wmrl_env.code_policy.CodePolicyRecipe`).

    Attributes:
        splits: task splits whose real runs are mined for pairs.
        max_turns: the episode length the reports show.
        first_per_task: first-turn pairs per task.
        ok_per_task: runs that scored, per task, whose revision is cloned (every failed
            run's fix is).
        tasks_per_split: how many tasks of each split (0: all).
    """

    splits: tuple[str, ...] = ("wm", "train")
    max_turns: int = 3
    first_per_task: int = 4
    ok_per_task: int = 8
    tasks_per_split: int = 0
    vocab_size: int = 2048
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    max_positions: int = 320
    epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 3e-3
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.first_per_task < 0:
            raise ValueError("epochs and batch_size must be >= 1, first_per_task >= 0")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads")


def make_lm_reviser(
    seed: int = 0, cache_dir: str | Path = "runs/lm_reviser", **overrides: Any
) -> Path:
    """The directory of the behaviour-cloned reviser for ``seed`` (built on the first call,
    then reused; the name holds the seed and a digest of the recipe)."""
    from wmrl_env.envs.ml_tasks import get_task, task_ids

    recipe = replace(ReviserRecipe(), **overrides)
    recipe = replace(recipe, splits=tuple(recipe.splits))
    digest = hashlib.sha256(json.dumps(asdict(recipe), sort_keys=True).encode()).hexdigest()
    path = Path(cache_dir) / f"lm-reviser-seed{seed}-{digest[:10]}"
    if (path / TRAINING_LOG).is_file():
        return path
    start = time.perf_counter()
    tasks = [
        t for split in recipe.splits for t in task_ids(split)[: recipe.tasks_per_split or None]
    ]
    pairs = revision_pairs(tasks, recipe.max_turns, seed, recipe.first_per_task, recipe.ok_per_task)
    descriptions = [get_task(t).description for t in tasks]
    tokenizer = train_code_tokenizer([p + c for p, c in pairs] + descriptions, recipe.vocab_size)
    model = build_code_model(
        tokenizer,
        hidden_size=recipe.hidden_size,
        num_layers=recipe.num_layers,
        num_heads=recipe.num_heads,
        max_positions=recipe.max_positions,
        seed=seed,
    )
    losses = clone_programs(model, tokenizer, pairs, recipe, seed=seed)  # type: ignore[arg-type]
    staging = path.with_name(path.name + ".partial")
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / "recipe.json").write_text(json.dumps(asdict(recipe), indent=2) + "\n")
    log = {"losses": losses, "seconds": time.perf_counter() - start, "pairs": len(pairs)}
    (staging / TRAINING_LOG).write_text(json.dumps(log, indent=2) + "\n")
    staging.rename(path)
    return path


@dataclass
class Turn:
    """One generated action: the prompt's and the completion's token ids, and at each
    completion position the tokens the constraint allowed (``None``: unconstrained)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    allowed: list[list[int]] | None = None


class LMReviser:
    """A causal LM that writes the next program from the last observation.

    Args:
        model, tokenizer: a ``GPT2LMHeadModel`` and its tokenizer (left padding).
        temperature: sampling temperature (``greedy=True`` in :meth:`act` ignores it).
        max_new_tokens: completion length limit (a program without its end is cut there);
            a prompt longer than the model's positions less this keeps its last tokens.
        learning_rate: Adam's learning rate for :meth:`update`.
        grid_only: constrain decoding to the task kind's 72 grid programs and ``STOP``
            (:func:`~wmrl_env.code_policy.constrained.grid_trie`): every program written is
            one the execution table holds, and log-probabilities are renormalised over the
            allowed tokens alike.
        seed: seeds the sampling (torch's global random state is left alone).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        max_new_tokens: int = 128,
        learning_rate: float = 1e-4,
        grid_only: bool = True,
        seed: int = 0,
    ) -> None:
        self.torch = require("torch", "LMReviser")
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.grid_only = grid_only
        self.optimizer = self.torch.optim.Adam(model.parameters(), lr=learning_rate)
        self._rng = np.random.default_rng(seed)
        self._tries: dict[str, TokenTrie] = {}
        self._prompt_limit = model.config.n_positions - max_new_tokens
        if self._prompt_limit < 16:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} leaves no room for a prompt in "
                f"{model.config.n_positions} positions"
            )
        tokenizer.truncation_side = "left"  # a prompt too long loses its start, not its end
        model.eval()

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> LMReviser:
        """The reviser saved in ``path`` (by :func:`make_lm_reviser`)."""
        transformers = require("transformers", "LMReviser.load")
        model = transformers.AutoModelForCausalLM.from_pretrained(path)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, padding_side="left")
        return cls(model, tokenizer, **kwargs)

    def reseed(self, seed: int | Sequence[int]) -> None:
        """Restart the sampling from ``seed`` (two calls from one seed sample alike)."""
        self._rng = np.random.default_rng(seed)

    def act(
        self,
        observations: Sequence[str],
        last_programs: Sequence[str | None],
        greedy: bool = False,
        batch_size: int = 64,
    ) -> tuple[list[str], list[Turn]]:
        """The next action (program text or ``"STOP"``) for each observation, given the
        program that produced it (``None`` on the first turn), and the generated turns."""
        task_ids = [task_of_observation(o) for o in observations]
        prompts = [
            revision_prompt(t, p, o if p is not None else None)
            for t, o, p in zip(task_ids, observations, last_programs, strict=True)
        ]
        tries = [self._trie(t) for t in task_ids] if self.grid_only else None
        turns: list[Turn] = []
        with _one_thread(self.torch), self.torch.random.fork_rng(devices=[]):
            self.torch.manual_seed(int(self._rng.integers(2**31)))
            for start in range(0, len(prompts), batch_size):
                chunk = slice(start, start + batch_size)
                turns += self._generate(prompts[chunk], tries and tries[chunk], greedy)
        return [t.text for t in turns], turns

    def _generate(
        self, prompts: list[str], tries: list[TokenTrie] | None, greedy: bool
    ) -> list[Turn]:
        batch = self.tokenizer(
            prompts,
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
            truncation=True,
            max_length=self._prompt_limit,
        )
        width = batch["input_ids"].shape[1]
        eos = self.tokenizer.eos_token_id

        def allowed(row: int, ids: Any) -> list[int]:
            assert tries is not None
            return tries[row].allowed(ids[width:].tolist()) or [eos]

        with self.torch.no_grad():
            out = self.model.generate(
                **batch,
                do_sample=not greedy,
                temperature=None if greedy else self.temperature,
                top_k=None if greedy else 0,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=eos,
                prefix_allowed_tokens_fn=allowed if tries is not None else None,
            )
        turns = []
        rows = zip(batch["input_ids"], batch["attention_mask"], out, strict=True)
        for k, (row, mask, full) in enumerate(rows):
            generated = full[width:].tolist()
            completion = generated[: generated.index(eos) + 1] if eos in generated else generated
            completion = [t for t in completion if t != self.tokenizer.pad_token_id]
            text = self.tokenizer.decode(completion, skip_special_tokens=True)
            sets = None
            if tries is not None:
                sets = [tries[k].allowed(completion[:i]) for i in range(len(completion))]
            action = "STOP" if text.strip() in ("", "STOP") else text
            turns.append(Turn(row[mask.bool()].tolist(), completion, action, sets))
        return turns

    def _trie(self, task_id: str) -> TokenTrie:
        from wmrl_env.envs.ml_tasks.env import resolve_task

        kind = resolve_task(task_id).kind
        if kind not in self._tries:
            self._tries[kind] = grid_trie(self.tokenizer, kind)
        return self._tries[kind]

    def log_probs(self, turns: Sequence[Turn]) -> Any:
        """Each turn's completion log-probability under the current weights (with gradient),
        over the tokens its constraint allowed at each position."""
        torch = self.torch
        rows = [t.prompt_ids + t.completion_ids for t in turns]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        logits = self.model(input_ids=ids, attention_mask=mask).logits.float()
        which, positions, chosen = [], [], []
        for i, turn in enumerate(turns):
            start = len(turn.prompt_ids)
            for k, token in enumerate(turn.completion_ids):
                which.append(i)
                positions.append(start + k - 1)  # the logits that predict token k
                chosen.append(token)
        picked = logits[torch.tensor(which), torch.tensor(positions)] / self.temperature
        if self.grid_only:
            blocked = torch.ones_like(picked, dtype=torch.bool)
            j = 0
            for turn in turns:
                for allowed in turn.allowed or [[t] for t in turn.completion_ids]:
                    blocked[j, allowed] = False
                    j += 1
            picked = picked.masked_fill(blocked, float("-inf"))
        token_lp = torch.log_softmax(picked, dim=-1)[
            torch.arange(len(chosen)), torch.tensor(chosen)
        ]
        return torch.zeros(len(turns)).index_add(0, torch.tensor(which), token_lp)

    def update(
        self, turns: Sequence[Turn], advantages: Sequence[float], batch_size: int = 32
    ) -> float:
        """One policy-gradient step: each turn's completion log-probability weighted by its
        episode's advantage, averaged over turns. Returns the loss."""
        if len(turns) != len(advantages):
            raise ValueError(f"{len(turns)} turns for {len(advantages)} advantages")
        torch = self.torch
        weights = torch.as_tensor(np.asarray(advantages, dtype=np.float32))
        if not torch.isfinite(weights).all():
            raise ValueError("advantages must be finite")
        if not turns:
            return 0.0
        self.model.train()
        self.optimizer.zero_grad()
        total = 0.0
        with _one_thread(torch):
            for start in range(0, len(turns), batch_size):
                chunk = slice(start, start + batch_size)
                loss = -(weights[chunk] * self.log_probs(turns[chunk])).sum() / len(turns)
                loss.backward()
                total += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
        self.model.eval()
        return total


@contextlib.contextmanager
def _one_thread(torch: Any) -> Iterator[None]:
    """Run a model this small on one thread (more only wait on each other)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
