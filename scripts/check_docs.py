"""Fail on internal references in user-facing text: tracker numbers, branch names, work periods,
team roles.

What a user reads is checked: README.md, CHANGELOG.md, everything under docs/ (Markdown,
reStructuredText, text reports, the Sphinx config), the docstrings and string literals (CLI
help, messages) of wmrl_env/, envs/, benchmarks/ and examples/, and the names of the files
under docs/ and examples/ (figure folders included). Tests, code comments and recorded data
(JSON, CSV) are not. Each finding is printed as ``path:line: pattern 'NAME' matched 'TEXT'``.

    python scripts/check_docs.py            # the repository this script is in
    python scripts/check_docs.py --root DIR FILE...   # only these files (relative to DIR)

A line that must keep a match (a quotation of a third party's text, say) carries
``docs-check: ignore`` (in a Python comment or a Markdown/HTML comment on that line).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Names of past development lines; a new one is caught by the generic "branch" patterns.
BRANCH_NAMES = (
    "robot2|wmacc|gatestd|lmscorer|lmpolicy|split2|fastctl|dockerwarm|robobench|robopolicy|wm3"
)
_COUNT = "two|three|four|five|six|seven|eight|nine|ten|\\d+"

# (name, regex) for prose: Markdown, docstrings, strings. Tuned so that the technical senses
# stay legal: a process's session (`setsid`, "a new session"), a multi-turn chat session, a
# decision tree's branch, helper functions.
TEXT_PATTERNS: tuple[tuple[str, str], ...] = (
    ("issue number", r"\bissues?[ -]#?\d+"),
    ("'#N' reference", r"(?<![\w&/#])#\d{2,}\b|\(#\d+\)|\b(?:see|in|from|PR|issue) #\d+"),
    ("pull request", r"\b(?:PR|pull request) ?#?\d+\b"),
    (
        "work period",
        r"\bsessions? \d+\b|\b(?:this|that|last|next|previous|the|first|second|third|fourth|"
        rf"fifth|sixth|other|earlier|later|past|{_COUNT}) sessions?\b(?!['’]?s? ?_?(?:id|leader))",
    ),
    (
        "branch",
        r"\b(?:this|that|the|a|its|earlier|other|same|own|each) branch(?:es|'s)?\b"
        r"|\bbranch(?:es)? [`'\"]|\bbranch run\b|\bbranch's\b",
    ),
    ("branch name", rf"\b(?:{BRANCH_NAMES})\b"),
    ("team role: lead", r"\bthe lead\b(?! (?:over|of|to|in|at)\b)|\blead's\b|\(lead\b"),
    (
        "team role: helper",
        rf"\b(?:other|another|{_COUNT}) helpers?\b|\bhelpers'|\bhelper's\b|\(\w+ helper\b",
    ),
    (
        "team role: developer",
        r"\bdevelopers?\b(?! (?:guide|docs|documentation|install|mode|extra)\b)",
    ),
    ("team role: engineer", r"\bengineers?\b"),
    ("brief item", r"\b(?:the brief|item \d+ of)\b"),
)

# for file and folder names: separators become spaces first
NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    ("issue number in a name", r"\bissue ?\d+"),
    ("work period in a name", r"\bsession ?\d*\b"),
    ("merge state in a name", r"\bmerged\b"),
    ("branch name in a name", rf"\b(?:{BRANCH_NAMES})\b"),
    ("team role in a name", r"\b(?:lead|helper|developer)\b"),
)

IGNORE_MARK = "docs-check: ignore"
PROSE_SUFFIXES = {".md", ".rst", ".txt"}
PYTHON_ROOTS = ("wmrl_env", "envs", "benchmarks", "examples", "docs")
NAMED_ROOTS = ("docs", "examples")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    pattern: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: pattern '{self.pattern}' matched '{self.text}'"


def _compiled(patterns: Iterable[tuple[str, str]]) -> list[tuple[str, re.Pattern[str]]]:
    return [(name, re.compile(rx, re.IGNORECASE)) for name, rx in patterns]


_TEXT = _compiled(TEXT_PATTERNS)
_NAME = _compiled(NAME_PATTERNS)


def scan_text(text: str, path: str, first_line: int = 1) -> Iterator[Finding]:
    """Every match of the prose patterns in ``text``, with its line number."""
    for offset, line in enumerate(text.splitlines()):
        if IGNORE_MARK in line:
            continue
        for name, rx in _TEXT:
            for m in rx.finditer(line):
                yield Finding(path, first_line + offset, name, m.group(0))


def scan_python(source: str, path: str) -> Iterator[Finding]:
    """Matches in a module's string literals (docstrings, help texts, messages)."""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for finding in scan_text(node.value, path, node.lineno):
                # the literal's own line carries the ignore mark for one-line strings
                own = lines[finding.line - 1] if finding.line <= len(lines) else ""
                if IGNORE_MARK not in own:
                    yield finding


def scan_name(path: str) -> Iterator[Finding]:
    """Matches in a file's path (folder and file names), separators read as spaces."""
    spaced = re.sub(r"[_\-./]+", " ", path)
    for name, rx in _NAME:
        for m in rx.finditer(spaced):
            yield Finding(path, 0, name, m.group(0))


def user_facing_files(root: Path) -> list[str]:
    """The repository's files (tracked and untracked, not ignored), relative to ``root``."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        out = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
        out = [p for p in out if not p.startswith((".git/", ".venv"))]
    return sorted(p for p in out if (root / p).is_file())


def check_file(root: Path, rel: str) -> Iterator[Finding]:
    """Findings for one file, by what kind of user-facing text it holds."""
    top = rel.split("/", 1)[0]
    suffix = Path(rel).suffix
    if top in NAMED_ROOTS:
        yield from scan_name(rel)
    prose = rel in ("README.md", "CHANGELOG.md") or (
        suffix in PROSE_SUFFIXES
        if top == "docs"
        else top in ("examples", "envs") and suffix == ".md"
    )
    if prose:
        yield from scan_text((root / rel).read_text(encoding="utf-8", errors="replace"), rel)
    elif top in PYTHON_ROOTS and suffix == ".py":
        source = (root / rel).read_text(encoding="utf-8")
        try:
            yield from scan_python(source, rel)
        except SyntaxError as err:
            yield Finding(rel, err.lineno or 0, "syntax error", str(err.msg))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("files", nargs="*", help="files relative to --root (default: all)")
    args = parser.parse_args(argv)
    files = args.files or user_facing_files(args.root)
    findings = [f for rel in files for f in check_file(args.root, rel)]
    for finding in findings:
        print(finding)
    if findings:
        print(
            f"check-docs: {len(findings)} internal reference(s) in user-facing text. Say what "
            "is true now, for a user: no tracker numbers, branch names, work periods or team "
            f"roles (or mark a quotation with '{IGNORE_MARK}').",
            file=sys.stderr,
        )
        return 1
    print(f"check-docs: {len(files)} files, no internal references")
    return 0


if __name__ == "__main__":
    sys.exit(main())
