"""The benchmark's world models: the default one reading structured actions as code, a
useless one for the never-worse check, and dialled mixtures of a model and the truth.

The policy acts in the structured program space; the bench's world model (v2,
:func:`~wmrl_env.world_models.load_ml_world_model`, pretrained on the execution table of
the suite's ``wm`` split alone) reads what the sandbox would run, the program text
rendered for the task. :class:`RandomWorldModel` scores uniformly at random: no information.
:class:`MixedWorldModel` scores ``(1 - W)`` * a model's prediction + ``W`` * the truth: a world
model of dialled quality that keeps the model's error structure (W = 0: the model, 1: exact).

Example:
    >>> model = RandomWorldModel(seed=0)
    >>> prediction = model.predict(["task"] * 3, [[0, 0, 0]] * 3)
    >>> prediction.scores.shape, bool(((prediction.scores >= 0) & (prediction.scores <= 1)).all())
    ((3,), True)
    >>> truth = {("task", "a"): 1.0, ("task", "b"): 0.0}
    >>> mixed = MixedWorldModel(RandomWorldModel(seed=0), truth, weight=1.0)
    >>> mixed.predict(["task", "task"], ["a", "b"]).scores.tolist()
    [1.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from wmrl_env.world_models.base import Prediction


class ProgramWorldModel:
    """Adapts a text world model (``predict(contexts, texts)``) to structured actions.

    Args:
        text_model: e.g. an :class:`~wmrl_env.world_models.EmbeddingRegressor`.
        kind_of: task description -> task kind (``"binary"``, ``"multiclass"``, ...).
    """

    def __init__(self, text_model: Any, kind_of: dict[str, str]) -> None:
        self.text_model = text_model
        self.kind_of = kind_of

    def _texts(self, contexts: Sequence[str], actions: Sequence[Any]) -> list[str]:
        from wmrl_env.envs.ml_tasks import ProgramSpec, render_program

        if len(contexts) != len(actions):
            raise ValueError(f"{len(contexts)} contexts but {len(actions)} actions")
        return [
            render_program(ProgramSpec.from_action(action), self.kind_of[context])
            for context, action in zip(contexts, actions, strict=True)
        ]

    def predict(self, contexts: Sequence[str], actions: Sequence[Any]) -> Prediction:
        return self.text_model.predict(list(contexts), self._texts(contexts, actions))

    def update(self, contexts: Sequence[str], actions: Sequence[Any], real: np.ndarray) -> None:
        self.text_model.update(list(contexts), self._texts(contexts, actions), real)


class RandomWorldModel:
    """Uniform random scores in [0, 1], whatever the program: a world model that knows nothing.

    Its std is the uniform distribution's (1/sqrt(12)) for every item.
    """

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def predict(self, contexts: Sequence[Any], actions: Sequence[Any]) -> Prediction:
        if len(contexts) != len(actions):
            raise ValueError(f"{len(contexts)} contexts but {len(actions)} actions")
        n = len(contexts)
        return Prediction(self.rng.uniform(0.0, 1.0, n), np.full(n, 12**-0.5))


class MixedWorldModel:
    """``(1 - weight)`` * ``inner``'s prediction + ``weight`` * the true score.

    Args:
        inner: the world model whose errors are kept (shrunk by ``1 - weight``); its
            ``update`` receives the anchors.
        truth: (context, artifact) -> the real score, for every item it will be asked about.
        weight: in [0, 1].
    """

    def __init__(self, inner: Any, truth: dict[tuple[Any, Any], float], weight: float) -> None:
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"weight must be in [0, 1], got {weight}")
        self.inner = inner
        self.truth = truth
        self.weight = float(weight)

    def predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> Prediction:
        if len(contexts) != len(artifacts):
            raise ValueError(f"{len(contexts)} contexts but {len(artifacts)} artifacts")
        try:
            true = np.array([self.truth[(c, a)] for c, a in zip(contexts, artifacts, strict=True)])
        except KeyError:
            raise KeyError("MixedWorldModel has no true score for an item asked about") from None
        inner = self.inner.predict(contexts, artifacts)
        scores = (1.0 - self.weight) * np.asarray(inner.scores) + self.weight * true
        std = None if inner.std is None else (1.0 - self.weight) * np.asarray(inner.std)
        return Prediction(scores, std, inner.valid, inner.reasons)

    def update(self, contexts: Sequence[Any], artifacts: Sequence[Any], real: np.ndarray) -> None:
        if hasattr(self.inner, "update"):
            self.inner.update(contexts, artifacts, real)


def default_world_model(task_ids: Sequence[str]) -> ProgramWorldModel:
    """World model v2 for ML programs (the program's syntax tree and the task's train file,
    pretrained on the ``wm`` split's execution table alone, learning each task online from
    its anchors), reading structured actions on ``task_ids`` as the programs they render.
    Not the package default (v3), which is pretrained on the ``train`` split too: the bench
    trains its policy on ``train`` tasks, whose real scores the world model must not know."""
    from wmrl_env.envs.ml_tasks import get_task
    from wmrl_env.world_models import load_ml_world_model

    kind_of = {get_task(t).description: get_task(t).kind for t in task_ids}
    return ProgramWorldModel(load_ml_world_model("v2"), kind_of)
