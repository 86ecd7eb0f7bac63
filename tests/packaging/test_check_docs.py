"""scripts/check_docs.py: internal references in user-facing text are found and named by file,
line and pattern; the technical senses of the same words pass; the repository is clean."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_docs.py"


def _load():
    spec = importlib.util.spec_from_file_location("check_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_docs"] = module
    spec.loader.exec_module(module)
    return module


check_docs = _load()

INTERNAL = [
    ("the gate of issue 23", "issue number"),
    ("as in the issue-18 run", "issue number"),
    ("fixed in #123", "'#N' reference"),
    ("merged in (#7)", "'#N' reference"),
    ("measured this session", "work period"),
    ("Robot bench cost, session 4", "work period"),
    ("after the third session's merges", "work period"),
    ("other sessions' jobs", "work period"),
    ("measured on this branch", "branch"),
    ("the `bench` branch's v2 run", "branch"),
    ("(branch `ucb`, 2026-12-03)", "branch"),
    ("the rerun of robot2", "branch name"),
    ("(lead, 2026-12-04)", "team role: lead"),
    ("the lead's run", "team role: lead"),
    ("three helpers' jobs at nice 10", "team role: helper"),
    ("(shadow helper, 2026-12-04)", "team role: helper"),
    ("(developer `suite`, 2026-12-03)", "team role: developer"),
    ("four other engineers' suites", "team role: engineer"),
    ("item 1 of the brief", "brief item"),
]

TECHNICAL = [
    "a new session, the job's uid",  # a process session (setsid)
    "process group and session, the limits above",
    "bwrap --new-session",
    "several outputs per session (`{uid}_{session_id}_{index}`)",
    "multi-turn sessions work",
    "its NaN then takes the majority branch",
    "the helpers are listed in the module",
    "one text helper, metric flattener",
    "the fused arms' early lead goes",
    "the lead over anchors",
    "Synthetic: Friedman #1 nonlinear regression",
    "issues with the sandbox",
]


@pytest.mark.parametrize(("text", "pattern"), INTERNAL)
def test_internal_references_are_found(text: str, pattern: str) -> None:
    found = list(check_docs.scan_text(text, "x.md"))
    assert pattern in {f.pattern for f in found}, found


@pytest.mark.parametrize("text", TECHNICAL)
def test_technical_senses_pass(text: str) -> None:
    assert list(check_docs.scan_text(text, "x.md")) == []


def test_names_with_internal_references_are_found() -> None:
    bad = "docs/figures/bench_pertask_full_session3/results.md"
    assert {f.pattern for f in check_docs.scan_name(bad)} == {"work period in a name"}
    assert {f.pattern for f in check_docs.scan_name("docs/figures/robot_bench_issue26/a.png")} == {
        "issue number in a name"
    }
    assert list(check_docs.scan_name("docs/figures/robot_bench_full/40seeds/results.md")) == []


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "figures" / "bench_merged").mkdir(parents=True)
    (tmp_path / "docs" / "figures" / "bench_merged" / "results.md").write_text("clean\n")
    (tmp_path / "README.md").write_text("# x\n\nclean line\nthe gate of issue 23 is fixed\n")
    pkg = tmp_path / "wmrl_env"
    pkg.mkdir()
    (pkg / "mod.py").write_text(
        '"""A module."""\n\n\ndef f():\n    """Return 1.\n\n    Measured this session.\n    """\n'
        "    # a comment about issue 5 is not user-facing\n    return 1\n"
    )
    (pkg / "ok.py").write_text('X = "bwrap --new-session"  # docs-check: ignore\n')
    return tmp_path


def test_report_names_file_line_and_pattern(tmp_path: Path, capsys) -> None:
    root = _tree(tmp_path)
    files = [
        "README.md",
        "wmrl_env/mod.py",
        "wmrl_env/ok.py",
        "docs/figures/bench_merged/results.md",
    ]
    assert check_docs.main(["--root", str(root), *files]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "README.md:4: pattern 'issue number' matched 'issue 23'" in out
    assert "wmrl_env/mod.py:7: pattern 'work period' matched 'this session'" in out
    assert (
        "docs/figures/bench_merged/results.md:0: pattern 'merge state in a name' matched 'merged'"
        in out
    )
    assert len(out) == 3, out  # the comment and the clean files are not reported


def test_clean_files_pass(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("What the package does, measured on 2026-12-03.\n")
    assert check_docs.main(["--root", str(tmp_path), "README.md"]) == 0


def test_the_repository_is_clean() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
