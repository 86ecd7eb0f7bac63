"""Run the README's quick-start block as a user pastes it, with whatever wmrl-env is installed.

    python scripts/readme_quickstart.py README.md

Which block: the first ```python fenced block in the section of the first Markdown heading
whose text contains "quick start", "quick-start" or "quickstart" (any case), before the next
heading of the same or a higher level. A README without such a heading falls back to its one
```python block (with none, or more than one, this fails and says so).

What the block gets: a fresh namespace holding ``my_policy`` (task descriptions -> programs:
for each task a random choice of the suite's structured program space, seeded), which a block
that defines its own ``my_policy`` replaces. It passes when it runs without an exception and,
where it leaves an ``info`` dict with ``is_anchor`` and ``exec_status``, every program it
executed for real ran ("ok"). It prints where ``wmrl_env`` was imported from, so a caller can
check that this was the installed package and not a checkout.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_QUICK = re.compile(r"quick[\s-]?start", re.IGNORECASE)
_BLOCK = re.compile(r"^```python\s*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def quickstart_block(readme: str) -> str:
    """The quick-start block of ``readme`` (the text of a README.md), as described above."""
    lines = readme.splitlines(keepends=True)
    for start, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading and _QUICK.search(heading.group(2)):
            level = len(heading.group(1))
            end = next(
                (
                    i
                    for i in range(start + 1, len(lines))
                    if (other := _HEADING.match(lines[i])) and len(other.group(1)) <= level
                ),
                len(lines),
            )
            found = _BLOCK.search("".join(lines[start + 1 : end]))
            if found is None:
                raise ValueError(f"no ```python block under the heading {line.strip()!r}")
            return found.group(1)
    blocks = _BLOCK.findall(readme)
    if len(blocks) != 1:
        raise ValueError(
            f"no 'Quick start' heading, and {len(blocks)} ```python blocks (1 is needed)"
        )
    return blocks[0]


def sampling_policy(seed: int = 0) -> Callable[[Sequence[str]], tuple[str, ...]]:
    """Task descriptions -> programs: a random choice of the structured space per task."""
    from wmrl_env.envs.ml_tasks import (
        ProgramSpec,
        get_task,
        program_space,
        render_program,
        task_ids,
    )

    kind_of = {get_task(t).description: get_task(t).kind for t in task_ids("all")}
    rng = np.random.default_rng(seed)
    space = program_space()

    def my_policy(descriptions: Sequence[str]) -> tuple[str, ...]:
        return tuple(
            render_program(ProgramSpec.from_action(rng.integers(space.nvec)), kind_of[d])
            for d in descriptions
        )

    return my_policy


def main(argv: Sequence[str]) -> int:
    readme = Path(argv[0])
    code = quickstart_block(readme.read_text(encoding="utf-8"))
    namespace: dict = {"__name__": "__main__", "my_policy": sampling_policy()}
    exec(compile(code, f"{readme} (quick start)", "exec"), namespace)
    import wmrl_env

    print(f"quick start ran: wmrl_env {wmrl_env.__version__} from {wmrl_env.__file__}")
    info = namespace.get("info")
    if isinstance(info, dict) and {"is_anchor", "exec_status"} <= set(info):
        anchors = np.asarray(info["is_anchor"], dtype=bool)
        statuses = np.asarray(info["exec_status"])[anchors]
        print(f"{anchors.sum()} programs executed for real: {sorted(set(statuses.tolist()))}")
        if not anchors.any() or (statuses != "ok").any():
            print("the quick start's real executions did not all run", file=sys.stderr)
            return 1
    envs = namespace.get("envs")
    if hasattr(envs, "close"):
        envs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
