"""A behaviour-cloned code policy worth post-training, cached on disk: :func:`make_code_policy`.

GRPO needs a start that writes runnable programs and writes different ones, so that groups
differ in outcome. :func:`make_code_policy` trains the tokenizer on the suite's program corpus
and task descriptions, then clones (task prompt -> program) pairs of many tasks
(:func:`~wmrl_env.code_policy.data.bc_pairs`: the grid's programs and recombinations of their
pieces, drawn independently of their scores) into a small GPT-2 (:class:`CodePolicyRecipe`),
and saves model and tokenizer with ``save_pretrained`` in a directory named by recipe and
seed, reused on the next call. The clone's tasks are the ``wm`` and ``train`` splits: the
``heldout`` tasks that GRPO trains on are new to it.

Example (needs the ``transformers`` extra)::

    path = make_code_policy(seed=0, cache_dir="runs/code_policy")
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from wmrl_env.code_policy.data import bc_pairs
from wmrl_env.code_policy.model import build_code_model, train_code_tokenizer
from wmrl_env.utils.imports import require

__all__ = ["CodePolicyRecipe", "clone_programs", "make_code_policy"]

TRAINING_LOG = "bc_log.json"


@dataclass(frozen=True)
class CodePolicyRecipe:
    """How the code policy is made.

    Attributes:
        splits: task splits whose prompts the clone is trained on.
        per_task: programs drawn per task.
        grid_share: share of programs drawn from the 72-program grid (the rest: other
            hyperparameter values and step orders).
        vocab_size: BPE vocabulary.
        hidden_size, num_layers, num_heads: the GPT-2's width, depth and heads.
        epochs: passes over the pairs.
        batch_size: pairs per gradient step.
        learning_rate: AdamW learning rate (linear decay to 0).
        weight_decay: AdamW weight decay.
    """

    splits: tuple[str, ...] = ("wm", "train")
    per_task: int = 24
    grid_share: float = 0.5
    vocab_size: int = 1024
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    epochs: int = 4
    batch_size: int = 32
    learning_rate: float = 3e-3
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.per_task < 1:
            raise ValueError("epochs, batch_size and per_task must be >= 1")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads")


def clone_programs(
    model: Any,
    tokenizer: Any,
    pairs: list[tuple[str, str]],
    recipe: CodePolicyRecipe,
    seed: int = 0,
) -> list[float]:
    """Train ``model`` in place on ``pairs`` (loss on the program and its EOS only); returns
    each epoch's mean token loss. Minibatch order is drawn from ``seed`` (torch's global
    random state is left alone)."""
    torch = require("torch", "clone_programs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small: more threads only wait on each other
    try:
        return _clone(torch, model, tokenizer, pairs, recipe, seed)
    finally:
        torch.set_num_threads(threads)


def _clone(
    torch: Any, model: Any, tokenizer: Any, pairs: list[tuple[str, str]], recipe: Any, seed: int
) -> list[float]:
    prompts = tokenizer([p for p, _ in pairs], add_special_tokens=False)["input_ids"]
    programs = tokenizer([c for _, c in pairs], add_special_tokens=False)["input_ids"]
    rows = [(p, [*c, tokenizer.eos_token_id]) for p, c in zip(prompts, programs, strict=True)]
    longest = max(len(p) + len(c) for p, c in rows)
    if longest > model.config.n_positions:
        raise ValueError(f"a pair has {longest} tokens, the model takes {model.config.n_positions}")
    ids = torch.full((len(rows), longest), tokenizer.pad_token_id)
    labels = torch.full((len(rows), longest), -100)
    mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for i, (prompt, program) in enumerate(rows):
        n = len(prompt) + len(program)
        ids[i, :n] = torch.tensor(prompt + program)
        labels[i, len(prompt) : n] = torch.tensor(program)
        mask[i, :n] = 1
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay
    )
    steps_per_epoch = -(-len(rows) // recipe.batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 1.0 - step / (recipe.epochs * steps_per_epoch)
    )
    generator = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    for _ in range(recipe.epochs):
        order, total, count = torch.randperm(len(rows), generator=generator), 0.0, 0
        for start in range(0, len(rows), recipe.batch_size):
            batch = order[start : start + recipe.batch_size]
            out = model(input_ids=ids[batch], attention_mask=mask[batch], labels=labels[batch])
            optimizer.zero_grad()
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            total, count = total + out.loss.item() * len(batch), count + len(batch)
        losses.append(total / count)
    model.eval()
    return losses


def make_code_policy(
    seed: int = 0, cache_dir: str | Path = "runs/code_policy", **overrides: Any
) -> Path:
    """The directory of the behaviour-cloned policy for ``seed`` (built on the first call).

    Args:
        seed: seeds the program draw, the weights and the minibatch order.
        cache_dir: where the policy directories live; the name holds the seed and a digest
            of the recipe, so a changed recipe never reuses a stale policy.
        **overrides: fields of :class:`CodePolicyRecipe` to change.

    The directory holds the model and tokenizer (``from_pretrained``), ``recipe.json`` and
    ``bc_log.json`` (loss per epoch, seconds, pairs).
    """
    from wmrl_env.envs.ml_tasks import get_task, task_ids

    recipe = replace(CodePolicyRecipe(), **overrides)
    recipe = replace(recipe, splits=tuple(recipe.splits))
    digest = hashlib.sha256(json.dumps(asdict(recipe), sort_keys=True).encode()).hexdigest()
    path = Path(cache_dir) / f"code-policy-seed{seed}-{digest[:10]}"
    if (path / TRAINING_LOG).is_file():
        return path
    start = time.perf_counter()
    tasks = [t for split in recipe.splits for t in task_ids(split)]
    pairs = bc_pairs(tasks, recipe.per_task, seed=seed, grid_share=recipe.grid_share)
    descriptions = [get_task(t).description for t in tasks]
    tokenizer = train_code_tokenizer([p + c for p, c in pairs] + descriptions, recipe.vocab_size)
    model = build_code_model(
        tokenizer,
        hidden_size=recipe.hidden_size,
        num_layers=recipe.num_layers,
        num_heads=recipe.num_heads,
        seed=seed,
    )
    losses = clone_programs(model, tokenizer, pairs, recipe, seed=seed)
    staging = path.with_name(path.name + ".partial")
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / "recipe.json").write_text(json.dumps(asdict(recipe), indent=2) + "\n")
    log = {
        "losses": losses,
        "seconds": time.perf_counter() - start,
        "pairs": len(pairs),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seed": seed,
    }
    (staging / TRAINING_LOG).write_text(json.dumps(log, indent=2) + "\n")
    staging.rename(path)
    return path
