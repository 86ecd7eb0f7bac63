"""World model v3 for ML code: learns the task at hand from how programs co-vary across tasks.

Three parts:

1. **Pretrained level** (:meth:`fit`): histogram gradient boosting on program x task
   feature rows (:mod:`~wmrl_env.world_models.programs.program_rows`), as in v2.
2. **Task profile** (:meth:`update`): on the pretraining tasks, the boosting's out-of-task
   residuals of a fixed grid of reference programs co-vary strongly (one task favours
   forests, another breaks every ``log1p`` program). Their covariance
   (:mod:`~wmrl_env.world_models.programs.program_covariance`, shrunk toward a structured target;
   the shrinkage and the execution noise chosen by how well a covariance fitted without
   a fold of tasks predicts that fold's residuals from 8, 16 and 32 of them) is the prior
   of a task's residual profile; a task's anchors condition it (a Gaussian posterior),
   which moves every program, anchored or not. Where too few tasks ran the grid's
   program pairs together (:func:`~wmrl_env.world_models.programs.program_covariance.identified`,
   e.g. the ``wm`` split alone: the same 20 of 72 programs everywhere), the covariance is
   v2's kernel over program features between the grid programs instead
   (``covariance_source == "features"``). A program off the grid enters as kernel
   weights over the grid programs nearest to it in program-feature space plus variance
   of its own (0 for a grid program, up to the mean prior variance for one unlike any).
   ``update`` merges repeated executions of one program (mean residual, count), so a
   converged policy's repeats narrow that program's posterior without evicting the
   diverse early anchors.
3. **How sure** (``Prediction.std``): a booster's prediction of |residual| (cross-fitted)
   x sqrt(posterior / prior variance) x one scale chosen by split-conformal calibration
   on tasks held out from the covariance fit (each fold's tasks against the covariance of
   the other folds), with uniform and on-policy anchors (a softmax policy concentrated on
   a few good programs, repeats included), zero-shot to 8 groups of 8.

Example:
    >>> from wmrl_env.world_models.programs.ml_default import load_ml_world_model
    >>> model = load_ml_world_model("v3")
    >>> from wmrl_env.envs.ml_tasks import get_task, ProgramSpec, render_program
    >>> task = get_task("wine")
    >>> programs = [render_program(ProgramSpec.from_index(i), task.kind) for i in (0, 28)]
    >>> model.update([task.description] * 2, programs, [0.2, 0.9])
    >>> p = model.predict([task.description] * 3, programs + ["def f(:"])
    >>> p.valid.tolist(), p.reasons[2], model.n_anchors(task.description)
    ([True, True, False], 'unparseable', 2)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
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
from wmrl_env.world_models.programs.program_covariance import (
    ProfilePosterior,
    ProgramCovariance,
    choose_covariance,
    fit_program_covariance,
    identified,
)
from wmrl_env.world_models.programs.program_features import PROGRAM_FEATURE_NAMES
from wmrl_env.world_models.programs.program_outcomes import program_outcomes
from wmrl_env.world_models.programs.program_rows import ProgramTaskRows
from wmrl_env.world_models.programs.status_model import StatusModel
from wmrl_env.world_models.programs.task_residual import fit_residual_prior
from wmrl_env.world_models.text import (
    as_text,
    check_batch,
    check_real_scores,
    forget_task,
    group_indices,
    text_key,
)

__all__ = ["FORMAT_VERSION", "ProgramProfileWorldModel", "on_policy_draw"]

FORMAT_VERSION = 2
"""Version of the saved format; :meth:`ProgramProfileWorldModel.load` refuses any other."""

_LEARNED = (
    "labels",  # the order of the covariance's rows (the grid's, as the constructor sets)
    "bandwidth",
    "covariance",
    "covariance_source",
    "shrinkage",
    "noise_share",
    "std_scale",
    "variance_floor",
    "fallback_score",
    "_level",
    "_spread",
    "_spread_floor",
    "_program_mean",
    "_program_scale",
    "_grid_space",
    "_grid_label",
)
_ARTIFACT = ArtifactFormat(
    FORMAT_VERSION,
    "profile",
    settings=(
        "task_feature_names",
        "grid",
        "grid_attributes",
        "score_range",
        "max_programs_per_task",
        "max_tasks",
        "seed",
    ),
    learned={name: name for name in _LEARNED},
)

ANCHOR_GROUPS = (0, 1, 2, 4, 8)
"""Anchor groups (of 8) the conformal calibration simulates."""
VARIANCE_FLOORS = (0.0, 0.01, 0.03, 0.1, 0.3)
"""Candidate floors of the variance ratio by which anchors shrink the std (:func:`_shrink`)."""
_MATCH_COLUMNS = GP_COLUMNS
"""Program features that place a program relative to the grid (hash buckets left out);
the same as v2's GP inputs, so v2's kernel can stand in for the covariance."""


def on_policy_draw(
    scores: np.ndarray, n: int, rng: np.random.Generator, temperature: float = 0.05
) -> np.ndarray:
    """``n`` indices drawn with replacement from a softmax policy concentrated on a few
    good programs: logits ``scores / temperature`` plus N(0, 2^2) noise per program (so
    the favoured programs are good but not always the best), as a GRPO policy that has
    converged part way samples.

    >>> draw = on_policy_draw(np.linspace(0, 1, 72), 32, np.random.default_rng(0))
    >>> len(draw), len(set(draw.tolist())) < 16
    (32, True)
    """
    logits = np.asarray(scores, dtype=np.float64) / temperature
    logits = logits + rng.normal(scale=2.0, size=len(logits))
    p = np.exp(logits - logits.max())
    return rng.choice(len(p), size=n, p=p / p.sum())


def _shrink(ratio: np.ndarray, floor: float) -> np.ndarray:
    """How much the anchors narrowed a program's std: sqrt of its posterior / prior variance
    ``ratio``, floored (the Gaussian posterior is surer than its errors).

    >>> _shrink(np.array([1.0, 0.0]), 0.1).round(3).tolist()
    [1.0, 0.302]
    """
    return np.sqrt((ratio + floor) / (1.0 + floor))


class ProgramProfileWorldModel:
    """Gradient boosting on program x task features, corrected per task through the
    program-program covariance of its errors.

    Args:
        task_featurizer: context -> task feature vector (fixed length; NaN allowed).
        task_feature_names: names of those features (see
            :class:`~wmrl_env.world_models.programs.program_rows.ProgramTaskRows`).
        grid: reference program label -> its program texts (e.g. one per task kind); the
            covariance is learned over these labels from pretraining pairs whose program
            is one of these texts.
        grid_attributes: label -> categorical attributes (e.g. preprocessing, model,
            capacity), the structure of the shrinkage target; None: no structure.
        score_range: predictions are clipped into it; real scores outside it are refused.
        max_programs_per_task, max_tasks: memory bounds of the online part (distinct
            programs per task, least recently updated evicted first; tasks, LRU).
        seed: seed of the boosting, the folds and the calibration's anchor draws.
    """

    def __init__(
        self,
        task_featurizer: Callable[[Any], np.ndarray],
        task_feature_names: Sequence[str],
        grid: Mapping[str, Sequence[str]],
        grid_attributes: Mapping[str, Sequence[Any]] | None = None,
        *,
        score_range: tuple[float, float] = (0.0, 1.0),
        max_programs_per_task: int = 256,
        max_tasks: int = 64,
        seed: int = 0,
    ) -> None:
        if not score_range[0] < score_range[1]:
            raise ValueError(f"score_range must have low < high, got {score_range}")
        if max_programs_per_task < 1 or max_tasks < 1:
            raise ValueError("max_programs_per_task and max_tasks must be at least 1")
        if len(grid) < 2:
            raise ValueError("the grid needs at least 2 reference programs")
        self.task_featurizer = task_featurizer
        self.task_feature_names = tuple(task_feature_names)
        self.labels = tuple(grid)
        self.grid = {label: tuple(grid[label]) for label in self.labels}
        self.grid_attributes = (
            None if grid_attributes is None else {k: tuple(grid_attributes[k]) for k in grid}
        )
        self.score_range = (float(score_range[0]), float(score_range[1]))
        self.max_programs_per_task = max_programs_per_task
        self.max_tasks = max_tasks
        self.seed = seed
        self.rows = ProgramTaskRows(task_featurizer, self.task_feature_names)
        self._level: Any = None
        self._spread: Any = None
        self._spread_floor = 0.0
        self._program_mean = np.zeros(len(PROGRAM_FEATURE_NAMES))
        self._program_scale = np.ones(len(PROGRAM_FEATURE_NAMES))
        self._grid_space = np.zeros((0, len(_MATCH_COLUMNS)))
        self._grid_label = np.zeros(0, dtype=int)
        self.bandwidth = 1.0
        self.covariance: ProgramCovariance | None = None
        self.covariance_source = "table"
        self.shrinkage = 0.5
        self.noise_share = 0.01
        self.std_scale = 1.0
        self.variance_floor = 0.0
        self.fallback_score = 0.5 * sum(self.score_range)
        self.status_model: StatusModel | None = None  # how runs end (predict_outcomes)
        self.pre_gate = PreGate()
        self._anchors: OrderedDict[str, OrderedDict[str, list[Any]]] = OrderedDict()
        self._posteriors: dict[str, ProfilePosterior] = {}
        self._placements: OrderedDict[str, tuple[np.ndarray, float]] = OrderedDict()
        self._cache: OrderedDict[tuple[str, str], tuple[float, float]] = OrderedDict()

    @property
    def fitted(self) -> bool:
        return self._level is not None

    # ----------------------------------------------------------------------- the grid
    def _space(self, rows: np.ndarray) -> np.ndarray:
        program = rows[:, : len(PROGRAM_FEATURE_NAMES)]
        scaled = (program - self._program_mean) / self._program_scale
        return np.nan_to_num(scaled)[:, _MATCH_COLUMNS]

    def _placement(self, rows: np.ndarray, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Weights over the grid labels and own variance share of each program (cached by
        program key): one-hot and 0 for a grid program; otherwise softmax weights of the
        nearest grid texts and 1 - exp(-d_min^2 / 2h^2)."""
        weights = np.zeros((len(keys), len(self.labels)))
        own = np.zeros(len(keys))
        new = [i for i, key in enumerate(keys) if key not in self._placements]
        if new:
            space = self._space(rows[new])
            squared = ((space[:, None, :] - self._grid_space[None, :, :]) ** 2).sum(axis=2)
            nearest = squared.min(axis=1)
            kernel = np.exp(-(squared - nearest[:, None]) / (2.0 * self.bandwidth**2))
            for j, i in enumerate(new):
                w = np.bincount(self._grid_label, kernel[j], minlength=len(self.labels))
                exact = nearest[j] < 1e-12
                if exact:  # a grid text: only the labels it matches exactly
                    w = np.bincount(
                        self._grid_label, squared[j] < 1e-12, minlength=len(self.labels)
                    ).astype(np.float64)
                share = 0.0 if exact else 1.0 - np.exp(-nearest[j] / (2.0 * self.bandwidth**2))
                self._placements[keys[i]] = (w / w.sum(), float(share))
            while len(self._placements) > 100_000:
                self._placements.popitem(last=False)
        for i, key in enumerate(keys):
            weights[i], own[i] = self._placements[key]
        return weights, own

    def _own_variance(self, share: np.ndarray) -> np.ndarray:
        return share * float(np.mean(np.diag(self.covariance.covariance)))

    # ----------------------------------------------------------------------- fitting
    def fit(
        self,
        contexts: Sequence[Any],
        programs: Sequence[Any],
        scores: np.ndarray,
        *,
        n_folds: int = 4,
    ) -> ProgramProfileWorldModel:
        """Pretrain on scored pairs of many tasks (a failed execution should score as the
        reward it gets, e.g. 0). Forgets every anchor. Tasks are the distinct contexts."""
        context_texts, program_texts = check_batch(contexts, programs)
        y, scored = check_real_scores(scores, len(program_texts), self.score_range)
        if not scored.all():
            raise ValueError("pretraining scores must be finite: score a failed execution 0")
        rows, ok = self.rows(list(contexts), program_texts)
        rows, y = rows[ok], y[ok]
        keys = [text_key(p) for p, good in zip(program_texts, ok, strict=True) if good]
        groups = np.unique(np.array(context_texts, dtype=object)[ok], return_inverse=True)[1]
        n_tasks = int(groups.max()) + 1 if len(groups) else 0
        if n_tasks < 2 * n_folds:
            raise ValueError(f"need scored programs of at least {2 * n_folds} tasks, got {n_tasks}")
        self._program_mean, self._program_scale = program_scale(rows)
        self._fit_grid()
        weights, share = self._placement(rows, keys)
        on_grid = share == 0.0
        label = np.where(on_grid, weights.argmax(axis=1), -1)
        folds = np.arange(n_tasks) % n_folds
        np.random.default_rng(self.seed).shuffle(folds)
        residuals, spread = np.empty_like(y), np.empty_like(y)
        with one_thread():
            for fold in range(n_folds):
                held = folds[groups] == fold
                level = self._fit_booster(rows[~held], y[~held])
                residuals[held] = y[held] - level.predict(rows[held])
            self._level = self._fit_booster(rows, y)
            self._spread_floor = float(np.mean(np.abs(residuals)))
            for fold in range(n_folds):  # out-of-task too, or the calibration is optimistic
                held = folds[groups] == fold
                model = self._fit_booster(rows[~held], np.abs(residuals[~held]), spread=True)
                spread[held] = self._spread_from(model.predict(rows[held]))
            self._spread = self._fit_booster(rows, np.abs(residuals), spread=True)
        self.fallback_score = float(np.mean(y))
        matrix = np.full((n_tasks, len(self.labels)), np.nan)
        sums = np.zeros_like(matrix)
        counts = np.zeros_like(matrix)
        np.add.at(sums, (groups[on_grid], label[on_grid]), residuals[on_grid])
        np.add.at(counts, (groups[on_grid], label[on_grid]), 1.0)
        seen = counts > 0
        matrix[seen] = sums[seen] / counts[seen]
        if identified(matrix):
            self.covariance_source = "table"
            attributes = self._attribute_matrix()
            self.shrinkage, self.noise_share = choose_covariance(
                matrix, folds, attributes=attributes
            )
            chosen = {
                "attributes": attributes,
                "shrinkage": self.shrinkage,
                "noise_share": self.noise_share,
            }
            covariances = [
                fit_program_covariance(matrix[folds != f], **chosen) for f in range(n_folds)
            ]
            self.covariance = fit_program_covariance(matrix, **chosen)
        else:  # too few tasks ran the grid's pairs: v2's feature kernel, over the grid
            self.covariance_source = "features"
            self.covariance = self._feature_covariance(rows, residuals, groups)
            covariances = [  # each fold's kernel fitted without it, as for the table's
                self._feature_covariance(rows, residuals, groups, folds != f)
                for f in range(n_folds)
            ]
        self.std_scale, self.variance_floor = self._conformal_scale(
            matrix, covariances, folds, spread, groups, label, y - residuals
        )
        self.reset_task()
        return self

    def _fit_grid(self) -> None:
        texts = [(i, text) for i, label in enumerate(self.labels) for text in self.grid[label]]
        features = self.rows.programs([text for _, text in texts])
        if any(f is None for f in features):
            raise ValueError("every grid program must be valid Python")
        program = np.stack(features)
        padded = np.concatenate(
            [program, np.zeros((len(program), self.rows.width - program.shape[1]))], axis=1
        )
        self._grid_space = self._space(padded)
        self._grid_label = np.array([i for i, _ in texts])
        squared = ((self._grid_space[:, None] - self._grid_space[None]) ** 2).sum(axis=2)
        other = self._grid_label[:, None] != self._grid_label[None, :]
        nearest = np.where(other, squared, np.inf).min(axis=1)
        self.bandwidth = float(np.sqrt(np.median(nearest[np.isfinite(nearest)]) / 2.0))
        self._placements.clear()
        self._cache.clear()

    def _feature_covariance(
        self,
        rows: np.ndarray,
        residuals: np.ndarray,
        groups: np.ndarray,
        tasks: np.ndarray | None = None,
    ) -> ProgramCovariance:
        """v2's kernel (bias + RBFs over blocks of standardised program features, fitted by
        maximum marginal likelihood on each task's out-of-task residuals) evaluated between
        the grid programs (each at the mean of its texts): the covariance when the table
        cannot teach one. ``tasks``: a mask of the tasks to fit on (default all)."""
        space = self._space(rows)
        n_tasks = int(groups.max()) + 1
        chosen = np.ones(n_tasks, dtype=bool) if tasks is None else tasks
        per_task = [np.flatnonzero(groups == g) for g in np.flatnonzero(chosen)]
        prior = fit_residual_prior(
            [space[i] for i in per_task], [residuals[i] for i in per_task], GP_BLOCKS
        )
        centres = np.stack(
            [self._grid_space[self._grid_label == j].mean(axis=0) for j in range(len(self.labels))]
        )
        kernel = prior.kernel(centres, centres) + 1e-6 * prior.total * np.eye(len(centres))
        return ProgramCovariance(np.zeros(len(self.labels)), kernel, prior.noise)

    def _attribute_matrix(self) -> np.ndarray | None:
        if self.grid_attributes is None:
            return None
        values = np.array([self.grid_attributes[label] for label in self.labels], dtype=object)
        values = values.reshape(len(self.labels), -1)
        return np.stack(
            [np.unique(column.astype(str), return_inverse=True)[1] for column in values.T], 1
        )

    def _fit_booster(self, rows: np.ndarray, target: np.ndarray, spread: bool = False) -> Any:
        return fit_booster(rows, target, seed=self.seed, spread=spread)

    def _spread_from(self, expected: np.ndarray) -> np.ndarray:
        return spread_std(expected, self._spread_floor)

    def _conformal_scale(
        self,
        matrix: np.ndarray,
        covariances: list[ProgramCovariance],
        folds: np.ndarray,
        spread: np.ndarray,
        groups: np.ndarray,
        label: np.ndarray,
        level: np.ndarray,
    ) -> tuple[float, float]:
        """The std scale and variance floor whose +-1 / +-1.96 intervals best cover
        68.3 % / 95.0 % of the real scores of tasks held out from the covariance fit, in
        the worst of the regimes (uniform and on-policy anchors, :data:`ANCHOR_GROUPS`
        groups of 8), on the grid programs not anchored."""
        rng = np.random.default_rng(self.seed)
        spread_of = np.full(matrix.shape, np.nan)
        real_of = np.full(matrix.shape, np.nan)
        on_grid = label >= 0
        spread_of[groups[on_grid], label[on_grid]] = spread[on_grid]
        real_of[groups[on_grid], label[on_grid]] = level[on_grid]
        real_of += matrix
        regimes: dict[tuple[str, int], list[np.ndarray]] = {}
        n_observed = (~np.isnan(matrix)).sum(axis=1)
        complete = n_observed >= 0.5 * matrix.shape[1]
        # tasks that ran most of the grid draw anchors as users do, from the whole space
        minimum = 0.5 * matrix.shape[1] if complete.sum() >= 10 else 12
        eye = np.eye(len(self.labels))
        for task, residual in enumerate(matrix):
            observed = np.flatnonzero(~np.isnan(residual))
            if len(observed) < minimum:
                continue
            cov = covariances[folds[task]]
            for n_groups in ANCHOR_GROUPS:
                for policy in ("uniform", "on_policy"):
                    if policy == "uniform" and 8 * n_groups <= len(observed) - 4:
                        drawn = rng.permutation(len(observed))[: 8 * n_groups]
                    elif policy == "on_policy" and n_groups > 0:
                        drawn = on_policy_draw(real_of[task, observed], 8 * n_groups, rng)
                    else:
                        continue
                    anchors, counts = np.unique(drawn, return_counts=True)
                    rest = observed[np.setdiff1d(np.arange(len(observed)), anchors)]
                    anchors = observed[anchors]
                    mean, prior = cov.prior(eye[rest], np.zeros(len(rest)))
                    variance = prior
                    if len(anchors):
                        posterior = ProfilePosterior.fit(
                            cov, eye[anchors], np.zeros(len(anchors)), anchors,
                            residual[anchors], counts,
                        )  # fmt: skip
                        mean, variance = posterior.predict(eye[rest], np.zeros(len(rest)), rest)
                    regimes.setdefault((policy, n_groups), []).append(
                        np.column_stack(
                            [
                                np.abs(residual[rest] - mean) / spread_of[task, rest],
                                (variance + cov.noise) / (prior + cov.noise),
                            ]
                        )
                    )
        stacked = [np.concatenate(parts).T for parts in regimes.values()]
        floored = {
            floor: [error / _shrink(ratio, floor) for error, ratio in stacked]
            for floor in VARIANCE_FLOORS
        }
        return coverage_scale(floored)

    # ----------------------------------------------------------------------- predicting
    def _pretrained(self, contexts: list[Any], programs: list[str]) -> tuple[Any, ...]:
        """The parseable mask and, for the parseable items: task keys, program keys, the
        pretrained level and spread, grid weights and own-variance shares; cached by
        (task, program) key."""
        tasks = [text_key(as_text(c)) for c in contexts]
        keys = [text_key(p) for p in programs]
        found = [self._cache.get(pair) for pair in zip(tasks, keys, strict=True)]
        new = [i for i, value in enumerate(found) if value is None]
        if new:
            rows, ok = self.rows(
                [contexts[i] for i in new],
                [programs[i] for i in new],
                [tasks[i] for i in new],
                [keys[i] for i in new],
            )
            level, spread = np.full(len(new), np.nan), np.full(len(new), np.nan)
            weights, share = np.zeros((len(new), len(self.labels))), np.zeros(len(new))
            if ok.any():
                with one_thread():
                    level[ok] = self._level.predict(rows[ok])
                    spread[ok] = self._spread_from(self._spread.predict(rows[ok]))
                weights[ok], share[ok] = self._placement(
                    rows[ok], [keys[i] for i in np.array(new)[ok]]
                )
            for j, i in enumerate(new):
                value = (level[j], spread[j], weights[j], share[j])
                found[i] = self._cache[(tasks[i], keys[i])] = value
            while len(self._cache) > 100_000:
                self._cache.popitem(last=False)
        index = [i for i, value in enumerate(found) if not np.isnan(value[0])]
        ok = np.zeros(len(found), dtype=bool)
        ok[index] = True
        picked = [found[i] for i in index]
        return (
            ok,
            [tasks[i] for i in index],
            np.array([keys[i] for i in index]),
            np.array([v[0] for v in picked]),
            np.array([v[1] for v in picked]),
            np.array([v[2] for v in picked]).reshape(len(index), len(self.labels)),
            np.array([v[3] for v in picked]),
        )

    def predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> Prediction:
        """Scores, std (calibrated), validity for every (context, program) pair."""
        if not self.fitted:
            raise RuntimeError("ProgramProfileWorldModel is not fitted: call fit() or load()")
        _, programs = check_batch(contexts, artifacts)
        ok, tasks, keys, level, spread, weights, share = self._pretrained(list(contexts), programs)
        scores = np.full(len(programs), self.fallback_score)
        prior_total = float(np.mean(np.diag(self.covariance.covariance)))
        std = np.full(len(programs), np.sqrt(prior_total) * self.std_scale)
        if ok.any():
            own = self._own_variance(share)
            mean, prior = self.covariance.prior(weights, own)
            variance = prior.copy()
            for task, members in group_indices(tasks).items():
                if task in self._anchors:
                    mean[members], variance[members] = self._posterior(task).predict(
                        weights[members], own[members], keys[members]
                    )
            noise = self.covariance.noise
            scores[ok] = np.clip(level + mean, *self.score_range)
            shrink = _shrink((variance + noise) / (prior + noise), self.variance_floor)
            std[ok] = spread * shrink * self.std_scale
        reasons = ["" if good else "unparseable" for good in ok]
        return Prediction(scores=scores, std=std, valid=ok.copy(), reasons=reasons)

    def predict_outcomes(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], failure_score: float | None = None
    ) -> OutcomePrediction:
        """The prediction contract (:mod:`~wmrl_env.world_models.programs.program_outcomes`): status
        probabilities, score given ok with its std, expected reward under ``failure_score``
        (default: the score range's low end)."""
        return program_outcomes(self, self.rows, contexts, artifacts, failure_score)

    def _posterior(self, task: str) -> ProfilePosterior:
        if task not in self._posteriors:
            entries = self._anchors[task]
            weights = np.stack([e[0] for e in entries.values()])
            own = self._own_variance(np.array([e[1] for e in entries.values()]))
            sums = np.array([e[2] for e in entries.values()])
            counts = np.array([e[3] for e in entries.values()], dtype=np.float64)
            self._posteriors[task] = ProfilePosterior.fit(
                self.covariance, weights, own, np.array(list(entries)), sums / counts, counts
            )
        return self._posteriors[task]

    # ----------------------------------------------------------------------- online
    def update(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
    ) -> None:
        """Learn from anchors: repeated programs are merged (residual sum and count), the
        task's posterior is refitted. NaN real scores (failed executions) and unparseable
        programs are skipped; infinite or out-of-range scores raise before anything
        changes."""
        if not self.fitted:
            raise RuntimeError("ProgramProfileWorldModel is not fitted: call fit() or load()")
        _, programs = check_batch(contexts, artifacts)
        real, keep = check_real_scores(real_scores, len(programs), self.score_range)
        ok, tasks, keys, level, _, weights, share = self._pretrained(list(contexts), programs)
        keep = keep[ok]
        if not keep.any():
            return
        tasks = [task for task, good in zip(tasks, keep, strict=True) if good]
        keys = keys[keep]
        residuals = real[ok][keep] - level[keep]
        weights, share = weights[keep], share[keep]
        for task, members in group_indices(tasks).items():
            entries = self._anchors.pop(task, OrderedDict())
            for i in members:
                entry = entries.pop(keys[i], [weights[i], share[i], 0.0, 0])
                entry[2] += float(residuals[i])
                entry[3] += 1
                entries[keys[i]] = entry  # most recently executed last
            while len(entries) > self.max_programs_per_task:
                entries.popitem(last=False)
            self._anchors[task] = entries  # most recently updated last
            self._posteriors.pop(task, None)
        while len(self._anchors) > self.max_tasks:
            evicted, _ = self._anchors.popitem(last=False)
            self._posteriors.pop(evicted, None)

    def n_anchors(self, context: Any) -> int:
        """Executions held for the task of ``context`` (repeats of a program counted)."""
        entries = self._anchors.get(text_key(as_text(context)), {})
        return int(sum(entry[3] for entry in entries.values()))

    def reset_task(self, context: Any | None = None) -> None:
        """Forget the anchors of one task (or of every task when ``context`` is None)."""
        forget_task(context, self._anchors, self._posteriors)

    def state_dict(self) -> dict[str, Any]:
        """The online state (per task, in LRU order: its distinct programs' keys, grid
        weights, own-variance shares, residual sums and counts), as plain arrays."""
        tasks = []
        for task, entries in self._anchors.items():
            values = list(entries.values())
            tasks.append(
                {
                    "key": task,
                    "programs": list(entries),
                    "weights": np.stack([v[0] for v in values]),
                    "shares": np.array([v[1] for v in values]),
                    "residual_sums": np.array([v[2] for v in values]),
                    "counts": np.array([v[3] for v in values], dtype=np.int64),
                }
            )
        return {"version": FORMAT_VERSION, "tasks": tasks}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` onto this pretrained model."""
        if state.get("version") != FORMAT_VERSION:
            raise ValueError(f"state version {state.get('version')} is not {FORMAT_VERSION}")
        anchors: OrderedDict[str, OrderedDict[str, list[Any]]] = OrderedDict()
        for task in state["tasks"]:
            weights = np.asarray(task["weights"], dtype=np.float64)
            n = len(task["programs"])
            columns = (task["shares"], task["residual_sums"], task["counts"])
            if weights.shape != (n, len(self.labels)) or any(len(c) != n for c in columns):
                raise ValueError(f"task {task['key']}: anchors of inconsistent shapes")
            anchors[str(task["key"])] = OrderedDict(
                (str(key), [weights[i].copy(), float(s), float(r), int(c)])
                for i, (key, s, r, c) in enumerate(zip(task["programs"], *columns, strict=True))
            )
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
        max_programs_per_task: int | None = None,
        max_tasks: int | None = None,
    ) -> ProgramProfileWorldModel:
        """Load :meth:`save`'s file (only from a trusted source: it is a pickle); the
        memory bounds of the online part may be changed."""
        return _ARTIFACT.load(
            cls,
            path,
            task_featurizer,
            max_programs_per_task=max_programs_per_task,
            max_tasks=max_tasks,
        )
