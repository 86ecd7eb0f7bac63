"""World model v4's status model: which inputs tell a crash from a run, cross-validated on
pretraining tasks only.

Each design fits v4's status model (:class:`~wmrl_env.world_models.programs.status_model.
StatusModel`, as ``open_space_fit`` fits it) on the pretraining rows of the other folds and
reads it on the held-out fold, in the three held-out schemes of
``benchmarks/v4_posterior_designs.py``: each generated pretraining family, each generated
pretraining task (its family's other seed in training), each fifth of the first suite's
``train``-split real datasets. Figures: status accuracy (the most probable status is the
real one) and failure AUC, on all the held-out fold's programs and on the sampled ones only
(outside the first suite's 72; the generated folds). The rule, fixed before reading: the
mean status accuracy over the three schemes; a design is kept only if it beats the current
one there. No held-out task of either suite is read.

Designs: the current rows (``current``); with one column saying whether a NaN can reach the
feature step and the model (``+ NaN reaches``: no imputation on a task with missing cells,
or ``log1p`` on a task with values below -1, where it gives NaN); with one column saying
whether such a NaN meets a step that refuses it (``+ NaN refused``: polynomial, spline or
univariate selection features, or a linear, k-NN or SVM model; the tree ensembles and
histogram boosting accept NaN); both.

    python benchmarks/v4_status_designs.py --cache runs/v4_status
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from wmrl_env.envs.ml_tasks.grammar import v1_subset
from wmrl_env.world_models.outcomes import STATUSES
from wmrl_env.world_models.programs.open_space import COLUMNS, status_columns
from wmrl_env.world_models.programs.open_space_build import pretraining_rows
from wmrl_env.world_models.programs.open_space_fit import family_of, training_matrix
from wmrl_env.world_models.programs.status_model import StatusModel

DESIGNS = {
    "current": (),
    "+ NaN reaches": ("nan_reaches",),
    "+ NaN refused": ("nan_refused",),
    "+ NaN reaches + NaN refused": ("nan_reaches", "nan_refused"),
}


def data(cache: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows x COLUMNS, labels, task ids, sampled program?, train-split real dataset?)."""
    path = cache / "status_rows.npz"
    if path.exists():
        saved = np.load(path, allow_pickle=False)
        return tuple(saved[k] for k in ("x", "labels", "ids", "sampled", "train"))  # type: ignore[return-value]
    from wmrl_env.envs.ml_tasks.registry import manifest_entry

    rows = pretraining_rows(first_suite=True)
    x = training_matrix(rows)
    ids = np.array(rows.task_ids)
    named = {p.render(k) for p in v1_subset() for k in ("binary", "multiclass", "regression")}
    sampled = np.array([p not in named for p in rows.programs])
    train = np.array([not t.startswith("hr_") and manifest_entry(t)["split"] == "train"
                      for t in ids])  # fmt: skip
    cache.mkdir(parents=True, exist_ok=True)
    labels = np.array(rows.labels)
    np.savez(path, x=x, labels=labels, ids=ids, sampled=sampled, train=train)
    return x, labels, ids, sampled, train


def folds(ids: np.ndarray, train: np.ndarray) -> dict[str, list[np.ndarray]]:
    """Held-out masks per scheme."""
    generated = np.array([t.startswith("hr_") for t in ids])
    families = np.array([family_of(t) if g else "" for t, g in zip(ids, generated, strict=True)])
    tasks = sorted(set(ids[train]))
    fifth = {t: i % 5 for i, t in enumerate(tasks)}
    fold = np.array([fifth.get(t, -1) for t in ids])
    return {
        "a generated family": [families == f for f in sorted(set(families[generated]))],
        "a generated task": [ids == t for t in sorted(set(ids[generated]))],
        "a fifth of the real datasets": [fold == k for k in range(5)],
    }


def read(x, labels, ids, sampled, train, extra: tuple[str, ...]) -> dict[str, dict[str, float]]:
    rows = status_columns(x, extra)
    truth = np.array([label.split(":")[0] for label in labels])
    out = {}
    for scheme, masks in folds(ids, train).items():
        predicted = np.empty(len(ids), dtype=object)
        p_fail = np.full(len(ids), np.nan)
        held = np.zeros(len(ids), dtype=bool)
        for mask in masks:
            model = StatusModel(min_count=5, seed=0).fit(rows[~mask], labels[~mask])
            status, _, _ = model.predict(rows[mask])
            predicted[mask] = np.array(STATUSES)[status.argmax(axis=1)]
            p_fail[mask] = 1.0 - status[:, 0]
            held |= mask
        figures = {}
        for part, members in (("all", held), ("sampled", held & sampled)):
            if not members.any():
                continue
            failed = truth[members] != "ok"
            figures[f"accuracy ({part})"] = float(np.mean(predicted[members] == truth[members]))
            figures[f"failure AUC ({part})"] = float(roc_auc_score(failed, p_fail[members]))
            figures[f"n ({part})"] = int(members.sum())
        out[scheme] = figures
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="runs/v4_status")
    args = parser.parse_args()
    x, labels, ids, sampled, train = data(Path(args.cache))
    assert x.shape[1] == len(COLUMNS)
    print("| design | held out | status accuracy, all / sampled | failure AUC, all / sampled |")
    print("|---|---|---|---|")
    means = {}
    for name, extra in DESIGNS.items():
        figures = read(x, labels, ids, sampled, train, extra)
        for scheme, f in figures.items():
            sampled_acc = f.get("accuracy (sampled)")
            sampled_auc = f.get("failure AUC (sampled)")
            print(
                f"| {name} | {scheme} | {f['accuracy (all)']:.3f} / "
                + ("-" if sampled_acc is None else f"{sampled_acc:.3f}")
                + f" | {f['failure AUC (all)']:.3f} / "
                + ("-" if sampled_auc is None else f"{sampled_auc:.3f}")
                + " |",
                flush=True,
            )
        means[name] = float(np.mean([f["accuracy (all)"] for f in figures.values()]))
    print()
    for name, mean in means.items():
        print(f"{name}: mean status accuracy over the three schemes {mean:.4f}")


if __name__ == "__main__":
    main()
