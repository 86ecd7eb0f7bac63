"""World model v4: reads any program of the ML suite's open space, pretrained on generated
tasks and the first suite's real datasets, learns each task from its anchors.

Three parts, each fitted on pretraining executions (never on a held-out task):

1. **What the program is** (:mod:`~.grammar_features`): the grammar's slots and every
   hyperparameter as a number, read from the program's estimator calls, beside the task's
   meta-features (:mod:`~.open_space_tasks`) and the width the feature step makes.
2. **A pretrained prior**: a status model (how a run ends: ``ok``, a crash and its class,
   a timeout; :class:`~wmrl_env.world_models.programs.status_model.StatusModel`) and a prediction of
   the reward (validation score normalised per task, a failed run 0). The reward is one of
   the designs of :data:`DESIGNS`, chosen by cross-validation over pretraining tasks.
3. **A per-task posterior** (:mod:`~.residual_regression`): Bayesian linear regression of
   the prior's residual on the program features; its block variances come from the
   pretraining tasks' out-of-task residuals, and its std is scaled so that ±1σ covers 68 % of
   held-out anchors' rewards in that cross-validation. A program that ran on the task is
   predicted from its own runs as well, as sure as the task's repeat noise allows
   (:meth:`OpenSpaceWorldModel.repeat_noise`).

``predict`` returns the expected reward and its std; ``predict_outcomes`` the package's
prediction contract (status probabilities, the score given ``ok``, the expected reward under
a failure score, the pre-gate's certain answers). Saved as one ``.npz`` state file (no
pickle).

Example:
    >>> from wmrl_env.world_models.programs.ml_default import load_ml_world_model
    >>> from wmrl_env.envs.ml_tasks.headroom import headroom_task
    >>> from wmrl_env.envs.ml_tasks.grammar import GrammarProgram
    >>> model = load_ml_world_model("v4")
    >>> task = headroom_task("hr_periodic_s3")
    >>> text = GrammarProgram.from_id("median/standard/spline9/linear:1.0").render(task.kind)
    >>> p = model.predict_outcomes([task.description] * 2, [text, "def f(:"])
    >>> p.status().tolist(), bool(0 <= p.expected_reward[0] <= 1)
    (['ok', 'does_not_parse'], True)
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.world_models.artifact_file import is_state_file, read_state, write_state
from wmrl_env.world_models.base import Prediction
from wmrl_env.world_models.outcomes import STATUSES, OutcomePrediction, combine_with_gate
from wmrl_env.world_models.programs.grammar_features import (
    PROGRAM_COLUMNS,
    comment_key,
    grammar_point,
    parse_program,
    program_vector,
)
from wmrl_env.world_models.programs.open_space_tasks import TASK_COLUMNS, task_vector
from wmrl_env.world_models.programs.residual_regression import BlockPrior, ResidualPosterior
from wmrl_env.world_models.programs.status_model import StatusModel
from wmrl_env.world_models.programs.tree_ensemble import TreeEnsemble
from wmrl_env.world_models.text import (
    as_text,
    check_batch,
    check_real_scores,
    forget_task,
    text_key,
)

__all__ = [
    "COLUMNS",
    "DESIGNS",
    "FORMAT_VERSION",
    "STATUS_COLUMNS",
    "OpenSpaceWorldModel",
    "program_blocks",
    "status_columns",
]

FORMAT_VERSION = 1
DESIGNS: tuple[str, ...] = ("ridge", "boost_reward", "boost_factored")
"""How the prior predicts the reward: ``ridge`` (a ridge regression on the program's
features, the same for every task), ``boost_reward`` (gradient boosting on program x task
features, a failure scored 0), ``boost_factored`` (the status model's ``p_ok`` times a
boosted score given ``ok``)."""
COLUMNS: tuple[str, ...] = (*PROGRAM_COLUMNS, *TASK_COLUMNS, "log_model_columns")
"""The feature row: program columns, task columns, log10 of the columns the model fits on."""
MIN_OK_SHARE = 0.05
REPEAT_PRIOR_RUNS = 4
"""How many repeated runs the pretrained repeat noise weighs as, against a task's own
repeats (:meth:`OpenSpaceWorldModel.repeat_noise`)."""
LEVEL_CENTRE, LEVEL_UNIT = 0.5, 0.3
_CACHE_SIZE = 200_000
_PROGRAM_INDEX = {name: i for i, name in enumerate(PROGRAM_COLUMNS)}
_TASK_INDEX = {name: i for i, name in enumerate(TASK_COLUMNS)}


def program_blocks(level_column: bool = False) -> np.ndarray:
    """Block of each posterior column: 0 the bias, 1 pipeline slots, 2 model family, 3 the
    family's hyperparameters, 4 the prior's expected reward (with ``level_column``)."""
    blocks = [0]
    for name in PROGRAM_COLUMNS:
        if name.startswith(("imputer=", "transform=", "features")):
            blocks.append(1)
        elif name.startswith("model="):
            blocks.append(2)
        else:
            blocks.append(3)
    if level_column:
        blocks.append(4)
    return np.array(blocks)


def model_columns(program: np.ndarray, task: np.ndarray) -> float:
    """log10 of the columns the model is fitted on (the feature step's width)."""
    col, t = _PROGRAM_INDEX, _TASK_INDEX
    columns = 10 ** task[t["log_columns"]] if math.isfinite(task[t["log_columns"]]) else 10.0
    missing = task[t["columns_with_missing_share"]]
    if program[col["imputer=indicator"]] and math.isfinite(missing):
        columns *= 1 + missing
    if program[col["features=poly2"]]:
        columns += columns * (columns + 1) / 2
    elif program[col["features=spline"]]:
        columns *= 10 ** program[col["features.log_spline_knots"]] + 2
    elif program[col["features=select"]]:
        columns *= program[col["features.kept_share"]]
    return float(np.log10(max(columns, 1.0)))


STATUS_COLUMNS: tuple[str, ...] = ("nan_reaches", "nan_refused")
"""Columns the status model may read beside :data:`COLUMNS`: ``nan_reaches``, whether a NaN
can reach the feature step and the model (no imputation on a task whose train rows have
missing cells, or ``log1p`` on a task with values below -1, where it gives NaN; the
transforms pass NaN on), and ``nan_refused``, whether such a NaN meets a step that refuses
it (polynomial, spline or univariate-selection features, a linear, k-NN or SVM model; the
tree models and histogram boosting accept NaN)."""


def status_columns(rows: np.ndarray, extra: Sequence[str]) -> np.ndarray:
    """``rows`` (:data:`COLUMNS`) with the :data:`STATUS_COLUMNS` named in ``extra``."""
    if not extra:
        return rows
    unknown = sorted(set(extra) - set(STATUS_COLUMNS))
    if unknown:
        raise ValueError(f"unknown status columns {unknown}; expected some of {STATUS_COLUMNS}")
    col, task = _PROGRAM_INDEX, len(PROGRAM_COLUMNS)
    missing = rows[:, task + _TASK_INDEX["missing_share"]]
    negative = rows[:, task + _TASK_INDEX["negative_columns_share"]]
    reaches = np.maximum(
        rows[:, col["imputer=none"]] * (np.nan_to_num(missing) > 0),
        rows[:, col["transform=log1p"]] * (np.nan_to_num(negative) > 0),
    )
    refusing = sum(rows[:, col[name]] for name in (
        "features=poly2", "features=spline", "features=select",
        "model=linear", "model=knn", "model=svm",
    ))  # fmt: skip
    made = {"nan_reaches": reaches, "nan_refused": reaches * (refusing > 0)}
    return np.column_stack([rows, *(made[name] for name in extra)])


def feature_row(parsed_vector: np.ndarray, task: np.ndarray) -> np.ndarray:
    row = np.empty(len(COLUMNS))
    row[: len(parsed_vector)], row[len(parsed_vector) : -1] = parsed_vector, task
    row[-1] = model_columns(parsed_vector, task)
    return row


class OpenSpaceWorldModel:
    """World model v4 (see the module doc). Build it with
    :func:`~wmrl_env.world_models.programs.open_space_fit.fit_open_space`, or :meth:`load`."""

    def __init__(
        self,
        *,
        design: str,
        status_model: StatusModel,
        reward: Any,
        z_mean: np.ndarray,
        z_scale: np.ndarray,
        residual_prior: BlockPrior,
        level_column: bool = False,
        std_scale: float = 1.0,
        score_range: tuple[float, float] = (0.0, 1.0),
        pretraining_tasks: Sequence[str] = (),
        max_tasks: int = 1000,
        status_inputs: Sequence[str] = (),
    ) -> None:
        if design not in DESIGNS:
            raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
        self.status_inputs = tuple(status_inputs)
        """the :data:`STATUS_COLUMNS` the status model reads beside :data:`COLUMNS`"""
        status_columns(np.zeros((0, len(COLUMNS))), self.status_inputs)  # checks the names
        self.design = design
        self.status_model = status_model
        self.reward = reward
        """``ridge``: ``(intercept, coefficients on z)``; ``boost_reward``: a
        :class:`TreeEnsemble` of the reward; ``boost_factored``: one of the score given ok"""
        self.z_mean = np.asarray(z_mean, dtype=np.float64)
        self.z_scale = np.asarray(z_scale, dtype=np.float64)
        self.residual_prior = residual_prior
        self.level_column = bool(level_column)
        """whether the posterior also reads the prior's own prediction (a per-task slope on
        it: the prior right on which programs differ but wrong on how much)"""
        self.std_scale = float(std_scale)
        self.score_range = (float(score_range[0]), float(score_range[1]))
        self.pretraining_tasks = tuple(pretraining_tasks)
        self.max_tasks = int(max_tasks)
        self.pre_gate = None
        self._rows: OrderedDict[tuple[str, str], tuple | None] = OrderedDict()
        self._comment_rows: OrderedDict[tuple[str, str], tuple | None] = OrderedDict()
        self._anchors: OrderedDict[str, OrderedDict[str, tuple]] = OrderedDict()
        """per task, per distinct program: ``(z, sum, sum of squares, count)`` of its runs'
        residuals"""
        self._posteriors: dict[str, ResidualPosterior] = {}

    fitted = True

    # ------------------------------------------------------------------ features
    def z_rows(self, rows: np.ndarray, expected: np.ndarray | None = None) -> np.ndarray:
        """Posterior design rows: 1, the standardised program columns, and with
        :attr:`level_column` the prior's expected reward (centred at 0.5, in units of 0.3)."""
        program = rows[:, : len(PROGRAM_COLUMNS)]
        z = np.column_stack([np.ones(len(rows)), (program - self.z_mean) / self.z_scale])
        if self.level_column:
            if expected is None:
                expected, _, _ = self.prior(rows)
            z = np.column_stack([z, (expected - LEVEL_CENTRE) / LEVEL_UNIT])
        return z

    def rows(
        self, contexts: Sequence[Any], programs: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
        """``(feature rows, parsed mask, (task key, program key) per item)``; each program is
        parsed once per task (cached); rows of unparsed items are NaN."""
        task_keys: dict[str, str] = {}  # a batch's groups share their task: hashed once
        keys = []
        for c, p in zip(contexts, programs, strict=True):
            text = as_text(c)
            if text not in task_keys:
                task_keys[text] = text_key(text)
            keys.append((task_keys[text], text_key(p)))
        out = np.full((len(programs), len(COLUMNS)), np.nan)
        parsed = np.zeros(len(programs), dtype=bool)
        for i, key in enumerate(keys):
            if key in self._rows:
                found = self._rows[key]
            else:
                found = self._comment_variant_row(key[0], contexts[i], programs[i])
                self._rows[key] = found
                if len(self._rows) > _CACHE_SIZE:
                    self._rows.popitem(last=False)
            if found is not None:
                out[i], parsed[i] = found, True
        return out, parsed, keys

    def _comment_variant_row(self, task: str, context: Any, program: str) -> np.ndarray | None:
        """The row of a program not seen before: that of a program seen on the task that
        differs from it only in comment or blank lines (:func:`comment_key`), else read."""
        code = comment_key(program)
        if code is None:
            return self._featurize(context, program)
        key = (task, text_key(code))
        if key not in self._comment_rows:
            self._comment_rows[key] = self._featurize(context, program)
            if len(self._comment_rows) > _CACHE_SIZE:
                self._comment_rows.popitem(last=False)
        return self._comment_rows[key]

    def _featurize(self, context: Any, program: str) -> np.ndarray | None:
        parsed = parse_program(program)
        if parsed is None:
            return None
        task = task_vector(as_text(context))
        if not _valid(parsed, program, task):
            return None
        return feature_row(program_vector(parsed), task)

    # ------------------------------------------------------------------ prior
    def prior(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(expected reward, status probabilities (N, 5), error-class probabilities)`` of
        parsed rows, before any anchor."""
        status, _, errors = self.status_model.predict(status_columns(rows, self.status_inputs))
        p_ok = status[:, 0]
        if self.design == "ridge":
            intercept, coefficients = self.reward
            program = rows[:, : len(PROGRAM_COLUMNS)]
            expected = intercept + ((program - self.z_mean) / self.z_scale) @ coefficients
        elif self.design == "boost_reward":
            expected = self.reward.predict(rows)
        else:
            expected = p_ok * np.clip(self.reward.predict(rows), *self.score_range)
        return np.clip(expected, *self.score_range), status, errors

    # ------------------------------------------------------------------ predicting
    def predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> Prediction:
        """Expected reward (a failed run 0), its calibrated std and validity per pair."""
        mean, std, ok, _, _ = self._predict(contexts, artifacts)
        reasons = ["" if good else "unparseable" for good in ok]
        return Prediction(scores=mean, std=std, valid=ok, reasons=reasons)

    def _predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> tuple:
        _, programs = check_batch(contexts, artifacts)
        rows, ok, keys = self.rows(list(contexts), programs)
        n = len(programs)
        mean, std = np.full(n, self.score_range[0]), np.full(n, np.nan)
        status = np.zeros((n, len(STATUSES)))
        status[:, 0] = 1.0
        errors = None
        if ok.any():
            expected, status_ok, errors_ok = self.prior(rows[ok])
            z = self.z_rows(rows[ok], expected)
            residual = np.zeros(len(z))
            variance = self.residual_prior.variance(z)
            tasks = np.array([keys[i][0] for i in np.flatnonzero(ok)])
            programs_ok = [keys[i][1] for i in np.flatnonzero(ok)]
            for task in np.unique(tasks):
                if task in self._anchors:
                    members = np.flatnonzero(tasks == task)
                    residual[members], variance[members] = self._task_prediction(
                        task, z[members], [programs_ok[i] for i in members]
                    )
            mean[ok] = np.clip(expected + residual, *self.score_range)
            std[ok] = np.sqrt(variance) * self.std_scale
            status[ok] = status_ok
            errors = np.full((n, errors_ok.shape[1]), 1.0 / errors_ok.shape[1])
            errors[ok] = errors_ok
        return mean, std, ok, status, errors

    def predict_outcomes(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], failure_score: float | None = None
    ) -> OutcomePrediction:
        """The prediction contract: status probabilities (the status model), the score given
        ``ok`` (the expected reward with failures, scored 0 in pretraining, taken out), its
        std, the expected reward under ``failure_score`` (default: the score range's low
        end) and the pre-gate's certain answers."""
        mean, std, ok, status, errors = self._predict(contexts, artifacts)
        programs = [as_text(a) for a in artifacts]
        failure = self.score_range[0] if failure_score is None else float(failure_score)
        p_ok = np.maximum(status[:, 0], MIN_OK_SHARE)
        score = np.where(ok, np.clip(mean / p_ok, *self.score_range), np.nan)
        std = np.where(ok, std / p_ok, np.nan)
        gate = self.pre_gate
        if gate is None:
            from wmrl_env.world_models.programs.ml_default import ml_pre_gate

            gate = self.pre_gate = ml_pre_gate()
        answer = gate.answer(programs, parses=[bool(o) or _compiles(p) for o, p in
                                              zip(ok, programs, strict=True)])  # fmt: skip
        classes = self.status_model.error_classes
        return combine_with_gate(answer, status, score, std, failure, classes, errors)

    # ------------------------------------------------------------------ online
    def update(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
    ) -> None:
        """Learn from anchors (rewards on the model's scale, a failure scored at the range's
        low end): each task's distinct programs keep their runs' residuals (sum, sum of
        squares, count); the task's posterior is refitted. NaN scores and unparsed programs
        are skipped; out-of-range scores raise before anything changes."""
        _, programs = check_batch(contexts, artifacts)
        real, keep = check_real_scores(real_scores, len(programs), self.score_range)
        rows, ok, keys = self.rows(list(contexts), programs)
        use = np.flatnonzero(ok & keep)
        if not use.size:
            return
        expected, _, _ = self.prior(rows[use])
        z = self.z_rows(rows[use], expected)
        for j, i in enumerate(use):
            task, program = keys[i]
            entries = self._anchors.pop(task, OrderedDict())
            _, total, squares, count = entries.pop(program, (None, 0.0, 0.0, 0))
            residual = float(real[i] - expected[j])
            entries[program] = (z[j], total + residual, squares + residual**2, count + 1)
            self._anchors[task] = entries
            self._posteriors.pop(task, None)
        while len(self._anchors) > self.max_tasks:
            evicted, _ = self._anchors.popitem(last=False)
            self._posteriors.pop(evicted, None)

    def _posterior(self, task: str) -> ResidualPosterior:
        if task not in self._posteriors:
            entries = list(self._anchors[task].values())
            counts, means = _runs(entries)
            self._posteriors[task] = ResidualPosterior.fit(
                self.residual_prior,
                np.stack([e[0] for e in entries]),
                means,
                counts,
                self._repeat_noise(entries),
            )
        return self._posteriors[task]

    def repeat_noise(self, context: Any) -> float:
        """The repeat noise of the task of ``context``: the pretrained value
        (:attr:`BlockPrior.repeat_noise`, weighted as :data:`REPEAT_PRIOR_RUNS` runs) pooled
        with the spread of the task's own repeated runs of a program."""
        entries = self._anchors.get(text_key(as_text(context)), {})
        return self._repeat_noise(list(entries.values()))

    def _repeat_noise(self, entries: Sequence[tuple]) -> float:
        spread = sum(squares - total**2 / count for _, total, squares, count in entries)
        repeats = sum(count - 1 for *_, count in entries)
        prior = self.residual_prior.repeat_noise * REPEAT_PRIOR_RUNS
        return (prior + max(spread, 0.0)) / (REPEAT_PRIOR_RUNS + repeats)

    def _task_prediction(
        self, task: str, z: np.ndarray, programs: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Residual and variance on one task with anchors: the posterior's, and for a
        program that ran on the task its own runs' (:meth:`ResidualPosterior.predict_seen`)."""
        posterior = self._posterior(task)
        residual, variance = posterior.predict(z)
        entries = self._anchors[task]
        seen = [j for j, program in enumerate(programs) if program in entries]
        if seen:
            counts, means = _runs([entries[programs[j]] for j in seen])
            residual[seen], variance[seen] = posterior.predict_seen(z[seen], means, counts)
        return residual, variance

    def n_anchors(self, context: Any) -> int:
        """Distinct programs the task of ``context`` has been taught."""
        return len(self._anchors.get(text_key(as_text(context)), {}))

    def reset_task(self, context: Any | None = None) -> None:
        """Forget one task's anchors (every task's when ``context`` is None)."""
        forget_task(context, self._anchors, self._posteriors)

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> dict[str, Any]:
        reward = self.reward
        if self.design == "ridge":
            reward = {"intercept": float(reward[0]), "coefficients": np.asarray(reward[1])}
        return {
            "format": "wmrl-open-space",
            "version": FORMAT_VERSION,
            "columns": COLUMNS,
            "design": self.design,
            "status": self.status_model.to_state((*COLUMNS, *self.status_inputs)),
            "status_inputs": self.status_inputs,
            "reward": reward,
            "z_mean": self.z_mean,
            "z_scale": self.z_scale,
            "block_variances": np.asarray(self.residual_prior.variances),
            "blocks": np.asarray(self.residual_prior.blocks),
            "noise": float(self.residual_prior.noise),
            "repeat_noise": float(self.residual_prior.repeat_noise),
            "level_column": self.level_column,
            "std_scale": self.std_scale,
            "score_range": self.score_range,
            "pretraining_tasks": self.pretraining_tasks,
        }

    def save(self, path: str | Path) -> Path:
        """Write the pretrained model (no anchors) to a ``.npz`` state file."""
        return write_state(self.to_state(), path)

    @classmethod
    def load(cls, path: str | Path) -> OpenSpaceWorldModel:
        """Read :meth:`save`'s file; a clear error when it is not a v4 model of this format."""
        if not Path(path).is_file() or not is_state_file(path):
            raise ValueError(f"{path}: not a saved open-space world model (a .npz state file)")
        state = read_state(path)
        if state.get("format") != "wmrl-open-space" or state.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{path}: not an open-space world model of format {FORMAT_VERSION} "
                f"(found {state.get('format')!r} {state.get('version')!r})"
            )
        if tuple(state["columns"]) != COLUMNS:
            raise ValueError(f"{path} was fitted on other feature columns: refit it")
        reward = state["reward"]
        if state["design"] == "ridge":
            reward = (reward["intercept"], np.asarray(reward["coefficients"]))
        elif not isinstance(reward, TreeEnsemble):
            raise ValueError(f"{path}: the reward model is not a tree ensemble")
        status_inputs = tuple(state.get("status_inputs", ()))
        return cls(
            design=state["design"],
            status_model=StatusModel.from_state(
                state["status"], (*COLUMNS, *status_inputs), str(path)
            ),
            status_inputs=status_inputs,
            reward=reward,
            z_mean=state["z_mean"],
            z_scale=state["z_scale"],
            residual_prior=BlockPrior(
                state["block_variances"],
                state["blocks"],
                state["noise"],
                float(state.get("repeat_noise", 0.0)),
            ),
            level_column=bool(state.get("level_column", False)),
            std_scale=state["std_scale"],
            score_range=tuple(state["score_range"]),
            pretraining_tasks=tuple(state["pretraining_tasks"]),
        )


def _runs(entries: Sequence[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """``(run counts, mean residuals)`` of anchor entries ``(z, sum, sum of squares, count)``."""
    counts = np.array([e[3] for e in entries], dtype=np.float64)
    return counts, np.array([e[1] for e in entries]) / counts


def _valid(parsed: Any, program: str, task: np.ndarray) -> bool:
    """Whether ``program`` compiles; the grammar's rendering of its parse is valid Python by
    construction, so a program that starts with it only has the rest checked (unless the
    rest holds something whose validity depends on what came before it)."""
    kinds = [k for k, i in _KIND_INDEX.items() if task[i] == 1.0]
    if len(kinds) != 1 or not _titled_for(program, kinds[0]):
        return _compiles(program)
    point = grammar_point(parsed, kinds[0])
    rendering = point.render(kinds[0]) if point is not None else None
    if rendering is None or not program.startswith(rendering):
        return _compiles(program)
    rest = program[len(rendering) :]
    if any(word in rest for word in _CONTEXT_WORDS) or rest.startswith("\ufeff"):
        return _compiles(program)
    return not rest or _compiles(rest)


def _titled_for(program: str, kind: str) -> bool:
    """Whether the first line of ``program`` can be a rendering's for ``kind``: a docstring
    ``Solution <title> (<kind>).``, as every rendering starts."""
    end = program.find("\n")
    return program.startswith('"""Solution ') and program.endswith(f' ({kind})."""', 0, end)


_KIND_INDEX = {k: TASK_COLUMNS.index(f"kind_{k}") for k in ("binary", "multiclass", "regression")}
_CONTEXT_WORDS = ("__future__", "global", "nonlocal", "coding")
"""Text after a complete module whose validity there may differ from its own (a future
import must come first, a global declaration after a use of the name fails, an encoding
line only counts on the first two lines)."""


def _compiles(program: str) -> bool:
    from wmrl_env.utils.python_source import parses

    return parses(program)
