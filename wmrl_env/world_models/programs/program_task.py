"""World model v2 for ML code: reads the program and the task, learns the task at hand.

Each (context, program) pair becomes one feature row: the program's syntax-tree features
(:mod:`~wmrl_env.world_models.programs.program_features`), the task's features (from
``task_featurizer(context)``; for the ML suite
:func:`wmrl_env.envs.ml_tasks.features.context_features`, which reads the train file of
the task a description names) and a few of their products that encode known failure modes
(``log1p`` on negative columns, no imputation on data with missing values, a classifier on
a regression task ...). Three parts:

1. **Pretrained** (:meth:`fit`): histogram gradient boosting on every pair of many tasks.
2. **Online, per task** (:meth:`update`): a Gaussian process on the residuals of that
   task's anchors (:mod:`~wmrl_env.world_models.programs.task_residual`), which can reorder
   programs; the newest ``max_anchors_per_task`` anchors of the ``max_tasks`` most recently
   updated tasks are kept (LRU).
3. **How sure** (``Prediction.std``): the GP's predictive std (its prior fitted on
   out-of-task residuals, so it is wide zero-shot and shrinks with anchors) times a scale
   fitted by task-grouped split conformal calibration so that +-1 and +-1.96 std cover
   about 68 % and 95 % of real scores on tasks the model never saw.

A program that is not valid Python is flagged (``valid`` False, reason ``"unparseable"``).

Example:
    >>> from wmrl_env.world_models import load_default_ml_world_model
    >>> model = load_default_ml_world_model()
    >>> from wmrl_env.envs.ml_tasks import get_task, ProgramSpec, render_program
    >>> task = get_task("wine")
    >>> programs = [render_program(ProgramSpec.from_index(i), task.kind) for i in (0, 28)]
    >>> p = model.predict([task.description] * 3, programs + ["def f(:"])
    >>> p.valid.tolist(), p.reasons[2], bool((p.std[:2] > 0).all())
    ([True, True, False], 'unparseable', True)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.sandboxes.pregate import PreGate
from wmrl_env.world_models.base import Prediction
from wmrl_env.world_models.conformal_std import coverage_scale
from wmrl_env.world_models.outcomes import OutcomePrediction
from wmrl_env.world_models.programs.gp_features import GP_BLOCKS, GP_COLUMNS
from wmrl_env.world_models.programs.pretraining import (
    ArtifactFormat,
    fit_booster,
    one_thread,
    program_scale,
    spread_std,
)
from wmrl_env.world_models.programs.program_features import PROGRAM_FEATURE_NAMES
from wmrl_env.world_models.programs.program_outcomes import program_outcomes
from wmrl_env.world_models.programs.program_rows import ProgramTaskRows
from wmrl_env.world_models.programs.status_model import StatusModel
from wmrl_env.world_models.programs.task_residual import (
    ResidualPrior,
    TaskPosterior,
    fit_residual_prior,
)
from wmrl_env.world_models.text import (
    as_text,
    check_batch,
    check_real_scores,
    forget_task,
    group_indices,
    text_key,
)

__all__ = ["FORMAT_VERSION", "ProgramTaskWorldModel"]

FORMAT_VERSION = 1
"""Version of the saved format; :meth:`ProgramTaskWorldModel.load` refuses any other."""

_ARTIFACT = ArtifactFormat(
    FORMAT_VERSION,
    "program",
    settings=("task_feature_names", "score_range", "max_anchors_per_task", "max_tasks", "seed"),
    learned={
        "booster": "_booster",
        "shape": "_shape",
        "shape_weight": "shape_weight",
        "spread": "_spread",
        "spread_floor": "_spread_floor",
        "program_mean": "_program_mean",
        "program_scale": "_program_scale",
        "prior": "prior",
        "std_scale": "std_scale",
        "fallback_score": "fallback_score",
    },
)


class ProgramTaskWorldModel:
    """Gradient boosting on program x task features, corrected online per task.

    Args:
        task_featurizer: context -> task feature vector (fixed length; NaN allowed).
        task_feature_names: names of those features (used by the interaction features,
            which look up ``missing_share``, ``negative_columns_share``, ``kind_*``,
            ``landmark_*``, ``log_rows``, ``log_columns`` when present).
        score_range: predictions are clipped into it; real scores outside it are refused.
        max_anchors_per_task, max_tasks: memory bounds of the online part.
        seed: seed of the boosting and of the calibration's anchor draws.
    """

    def __init__(
        self,
        task_featurizer: Callable[[Any], np.ndarray],
        task_feature_names: Sequence[str],
        *,
        score_range: tuple[float, float] = (0.0, 1.0),
        max_anchors_per_task: int = 256,
        max_tasks: int = 64,
        seed: int = 0,
    ) -> None:
        if not score_range[0] < score_range[1]:
            raise ValueError(f"score_range must have low < high, got {score_range}")
        if max_anchors_per_task < 1 or max_tasks < 1:
            raise ValueError("max_anchors_per_task and max_tasks must be at least 1")
        self.task_featurizer = task_featurizer
        self.task_feature_names = tuple(task_feature_names)
        self.score_range = (float(score_range[0]), float(score_range[1]))
        self.max_anchors_per_task = max_anchors_per_task
        self.max_tasks = max_tasks
        self.seed = seed
        self._row_builder = ProgramTaskRows(task_featurizer, self.task_feature_names)
        self._booster: Any = None  # the level: score of a program on a task
        self._shape: Any = None  # the order within a task: within-task z-score
        self.shape_weight = 0.0
        self._spread: Any = None  # predicts |out-of-task residual|: where the model errs
        self._spread_floor = 0.0
        self._width = self._row_builder.width
        self._program_mean = np.zeros(len(PROGRAM_FEATURE_NAMES))
        self._program_scale = np.ones(len(PROGRAM_FEATURE_NAMES))
        self.prior: ResidualPrior | None = None
        self.std_scale = 1.0
        self.fallback_score = 0.5 * sum(self.score_range)
        self.status_model: StatusModel | None = None  # how runs end (predict_outcomes)
        self.pre_gate = PreGate()
        self._anchors: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._posteriors: dict[str, TaskPosterior] = {}

    # ----------------------------------------------------------------------- features
    @property
    def fitted(self) -> bool:
        return self._booster is not None

    def _rows(self, contexts: Sequence[Any], programs: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Feature rows (NaN rows for unparseable programs) and the parseable mask."""
        return self._row_builder(contexts, programs)

    def _program_space(self, rows: np.ndarray) -> np.ndarray:
        """Standardised program features (the GP's input); NaN -> the training mean."""
        program = rows[:, : len(PROGRAM_FEATURE_NAMES)]
        return np.nan_to_num((program - self._program_mean) / self._program_scale)[:, GP_COLUMNS]

    # ----------------------------------------------------------------------- fitting
    def fit(
        self,
        contexts: Sequence[Any],
        programs: Sequence[Any],
        scores: np.ndarray,
        *,
        n_folds: int = 4,
    ) -> ProgramTaskWorldModel:
        """Pretrain on scored pairs of many tasks (a failed execution should score as the
        reward it gets, e.g. 0). Forgets every anchor. Tasks are the distinct contexts.

        Fits the booster, then, from out-of-task (grouped ``n_folds``-fold) residuals, the
        residual prior and the conformal std scale.
        """
        context_texts, program_texts = check_batch(contexts, programs)
        y, scored = check_real_scores(scores, len(program_texts), self.score_range)
        if not scored.all():
            raise ValueError("pretraining scores must be finite: score a failed execution 0")
        rows, ok = self._rows(contexts, program_texts)
        rows, y = rows[ok], y[ok]
        groups = np.unique(np.array(context_texts, dtype=object)[ok], return_inverse=True)[1]
        n_tasks = int(groups.max()) + 1 if len(groups) else 0
        if n_tasks < 2:
            raise ValueError(f"need scored programs of at least 2 tasks, got {n_tasks}")
        self._program_mean, self._program_scale = program_scale(rows)
        out_of_task = np.empty_like(y)
        folds = np.arange(n_tasks) % min(n_folds, n_tasks)
        np.random.default_rng(self.seed).shuffle(folds)
        z = _within_task_z(y, groups)
        shape_out_of_task = np.empty_like(y)
        with one_thread():
            for fold in np.unique(folds):
                held = folds[groups] == fold
                out_of_task[held] = self._fit_booster(rows[~held], y[~held]).predict(rows[held])
                shape = self._fit_booster(rows[~held], z[~held])
                shape_out_of_task[held] = shape.predict(rows[held])
            # the shape booster learns the order within a task; its weight is the
            # out-of-task least-squares coefficient of the level booster's residuals on it
            centred_residual = _within_task_z(y - out_of_task, groups, scale=False)
            centred_shape = _within_task_z(shape_out_of_task, groups, scale=False)
            power = float(centred_shape @ centred_shape)
            fit = float(centred_residual @ centred_shape) / power if power > 0 else 0.0
            self.shape_weight = max(0.0, fit)
            out_of_task += self.shape_weight * shape_out_of_task
            self._booster = self._fit_booster(rows, y)
            self._shape = self._fit_booster(rows, z)
            residuals = y - out_of_task
            self._spread_floor = float(np.mean(np.abs(residuals)))
            spread = np.empty_like(y)  # out-of-task too, or the calibration is optimistic
            for fold in np.unique(folds):
                held = folds[groups] == fold
                absolute = np.abs(residuals[~held])
                spread[held] = self._fit_booster(rows[~held], absolute, spread=True).predict(
                    rows[held]
                )
            spread = spread_std(spread, self._spread_floor)
            self._spread = self._fit_booster(rows, np.abs(residuals), spread=True)
        self.fallback_score = float(np.mean(y))
        space = self._program_space(rows)
        per_task = [np.flatnonzero(groups == g) for g in range(n_tasks)]
        self.prior = fit_residual_prior(
            [space[i] for i in per_task], [residuals[i] for i in per_task], GP_BLOCKS
        )
        self.std_scale = self._conformal_scale(space, residuals, spread, per_task)
        self._anchors.clear()
        self._posteriors.clear()
        return self

    def _fit_booster(self, rows: np.ndarray, target: np.ndarray, spread: bool = False) -> Any:
        return fit_booster(rows, target, seed=self.seed, spread=spread)

    def _spread_of(self, rows: np.ndarray) -> np.ndarray:
        """Zero-shot std before calibration: sqrt(pi/2) x the predicted |residual|."""
        return spread_std(self._spread.predict(rows), self._spread_floor)

    def _conformal_scale(
        self,
        space: np.ndarray,
        residuals: np.ndarray,
        spread: np.ndarray,
        per_task: list[np.ndarray],
    ) -> float:
        """The std scale whose +-1 / +-1.96 intervals best cover 68.3 % / 95.0 % of the
        out-of-task residuals, zero-shot and after 1, 2 and 4 groups of 8 anchors."""
        rng = np.random.default_rng(self.seed)
        z = []
        for members in per_task:
            for n_anchors in (0, 8, 16, 32):
                if n_anchors >= len(members) - 4:
                    continue
                order = rng.permutation(members)
                anchors, rest = order[:n_anchors], order[n_anchors:]
                mean, variance = self._posterior_for(
                    space[anchors], residuals[anchors], space[rest]
                )
                std = spread[rest] * np.sqrt(variance / self.prior.total)
                z.append(np.abs(residuals[rest] - mean) / std)
        # v2 tries scales up to the 0.8 quantile (v3 and ConformalStd: 0.85), as it always has
        scale, _ = coverage_scale({0.0: [np.concatenate(z)]}, np.linspace(0.5, 0.8, 61))
        return scale

    def _posterior_for(
        self, anchors: np.ndarray, residuals: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        if len(anchors) == 0:
            return np.zeros(len(x)), np.full(len(x), self.prior.total)
        return TaskPosterior.fit(self.prior, anchors, residuals).predict(x)

    # ----------------------------------------------------------------------- predicting
    def predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> Prediction:
        """Scores, std (calibrated), validity for every (context, program) pair."""
        if not self.fitted:
            raise RuntimeError("ProgramTaskWorldModel is not fitted: call fit() or load()")
        _, programs = check_batch(contexts, artifacts)
        contexts = list(contexts)
        rows, ok = self._rows(contexts, programs)
        scores = np.full(len(programs), self.fallback_score)
        std = np.full(len(programs), np.sqrt(self.prior.total) * self.std_scale)
        if ok.any():
            with one_thread():
                base = self._base(rows[ok])
                spread = self._spread_of(rows[ok])
            correction, variance = np.zeros(len(base)), np.full(len(base), self.prior.total)
            keys = [text_key(as_text(contexts[i])) for i in np.flatnonzero(ok)]
            space = self._program_space(rows[ok])
            for key, members in group_indices(keys).items():
                if key in self._anchors:
                    correction[members], variance[members] = self._posterior(key).predict(
                        space[members]
                    )
            scores[ok] = np.clip(base + correction, *self.score_range)
            std[ok] = spread * np.sqrt(variance / self.prior.total) * self.std_scale
        reasons = ["" if good else "unparseable" for good in ok]
        return Prediction(scores=scores, std=std, valid=ok.copy(), reasons=reasons)

    def predict_outcomes(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], failure_score: float | None = None
    ) -> OutcomePrediction:
        """The prediction contract (:mod:`~wmrl_env.world_models.programs.program_outcomes`): status
        probabilities, score given ok with its std, expected reward under ``failure_score``
        (default: the score range's low end)."""
        return program_outcomes(self, self._row_builder, contexts, artifacts, failure_score)

    def _base(self, rows: np.ndarray) -> np.ndarray:
        return self._booster.predict(rows) + self.shape_weight * self._shape.predict(rows)

    def _posterior(self, key: str) -> TaskPosterior:
        if key not in self._posteriors:
            x, residuals = self._anchors[key]
            self._posteriors[key] = TaskPosterior.fit(self.prior, x, residuals)
        return self._posteriors[key]

    # ----------------------------------------------------------------------- online
    def update(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
    ) -> None:
        """Learn from anchors: each task's residual posterior is refitted on its newest
        ``max_anchors_per_task`` anchors. NaN real scores (failed executions) and
        unparseable programs are skipped; infinite or out-of-range scores raise before
        anything changes."""
        if not self.fitted:
            raise RuntimeError("ProgramTaskWorldModel is not fitted: call fit() or load()")
        _, programs = check_batch(contexts, artifacts)
        real, keep = check_real_scores(real_scores, len(programs), self.score_range)
        contexts = list(contexts)
        rows, ok = self._rows(contexts, programs)
        keep &= ok
        if not keep.any():
            return
        with one_thread():
            residuals = real[keep] - self._base(rows[keep])
        space = self._program_space(rows[keep])
        keys = [text_key(as_text(contexts[i])) for i in np.flatnonzero(keep)]
        for key, members in group_indices(keys).items():
            old_x, old_r = self._anchors.pop(key, (space[:0], residuals[:0]))
            x = np.concatenate([old_x, space[members]])[-self.max_anchors_per_task :]
            r = np.concatenate([old_r, residuals[members]])[-self.max_anchors_per_task :]
            self._anchors[key] = (x, r)  # most recently updated last
            self._posteriors.pop(key, None)
        while len(self._anchors) > self.max_tasks:
            evicted, _ = self._anchors.popitem(last=False)
            self._posteriors.pop(evicted, None)

    def n_anchors(self, context: Any) -> int:
        """Anchors held for the task of ``context``."""
        entry = self._anchors.get(text_key(as_text(context)))
        return 0 if entry is None else len(entry[1])

    def reset_task(self, context: Any | None = None) -> None:
        """Forget the anchors of one task (or of every task when ``context`` is None)."""
        forget_task(context, self._anchors, self._posteriors)

    def state_dict(self) -> dict[str, Any]:
        """The online state (every task's anchors, in LRU order), as plain arrays."""
        return {
            "version": FORMAT_VERSION,
            "tasks": [
                {"key": key, "x": x.copy(), "residuals": r.copy()}
                for key, (x, r) in self._anchors.items()
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` onto this pretrained model."""
        if state.get("version") != FORMAT_VERSION:
            raise ValueError(f"state version {state.get('version')} is not {FORMAT_VERSION}")
        width = len(GP_COLUMNS)
        anchors: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        for entry in state["tasks"]:
            x = np.asarray(entry["x"], dtype=np.float64)
            r = np.asarray(entry["residuals"], dtype=np.float64)
            if x.ndim != 2 or x.shape[1] != width or r.shape != (len(x),):
                raise ValueError(f"task {entry['key']}: anchors of shape {x.shape}, {r.shape}")
            anchors[str(entry["key"])] = (x.copy(), r.copy())
        self._anchors = anchors
        self._posteriors = {}

    # ----------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        """Pickle the pretrained model (without the task featurizer and any anchors)."""
        return _ARTIFACT.save(self, path)

    @classmethod
    def load(
        cls,
        path: str | Path,
        task_featurizer: Callable[[Any], np.ndarray],
        *,
        max_anchors_per_task: int | None = None,
        max_tasks: int | None = None,
    ) -> ProgramTaskWorldModel:
        """Load :meth:`save`'s file (only from a trusted source: it is a pickle); the
        memory bounds of the online part may be changed."""
        return _ARTIFACT.load(
            cls,
            path,
            task_featurizer,
            max_anchors_per_task=max_anchors_per_task,
            max_tasks=max_tasks,
        )


def _within_task_z(y: np.ndarray, groups: np.ndarray, scale: bool = True) -> np.ndarray:
    """Each value centred (and, with ``scale``, standardised) within its task."""
    z = np.zeros_like(y)
    for g in np.unique(groups):
        members = groups == g
        spread = y[members].std() if scale else 1.0
        z[members] = (y[members] - y[members].mean()) / spread if spread > 0 else 0.0
    return z
