"""Do two ``wmrl bench --domain robosuite`` folders hold the same records, timing aside?

Compares ``runs.jsonl``, ``evaluations.jsonl``, ``seeds.jsonl`` and ``predictor.jsonl`` line
by line (as sets of lines: processes may append in another order) with the timing fields
(``real_exec_seconds``, ``wall_seconds``, ``wm_seconds``) and the ``made_with`` stamps
removed; what a speed-up must leave unchanged (docs/benchmarks.md, "Cost"). Exits 1 if any
file differs.

    python benchmarks/robot_bench_same_records.py /tmp/fc/cost/r2-main /tmp/fc/cost/r2-after
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

FILES = ("runs.jsonl", "evaluations.jsonl", "seeds.jsonl", "predictor.jsonl")
TIMING = frozenset({"real_exec_seconds", "wall_seconds", "wm_seconds", "made_with"})


def without_timing(value: Any) -> Any:
    """``value`` with every timing field (and stamp) dropped, NaN made comparable.

    >>> without_timing({"step": 1, "wall_seconds": 2.5, "kappa": float("nan")})
    {'step': 1, 'kappa': 'nan'}
    """
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def records(folder: Path, name: str) -> list[str]:
    lines = (folder / name).read_text().splitlines()
    return sorted(json.dumps(without_timing(json.loads(x)), sort_keys=True) for x in lines if x)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args(argv)
    same = True
    for name in FILES:
        missing = [str(f) for f in (args.first, args.second) if not (f / name).exists()]
        if missing:
            same = False
            print(f"{name}: missing in {', '.join(missing)}")
            continue
        first, second = records(args.first, name), records(args.second, name)
        same &= first == second
        print(f"{name}: {len(first)} / {len(second)} lines, same: {first == second}")
    print("same records" if same else "DIFFERENT records")
    raise SystemExit(0 if same else 1)


if __name__ == "__main__":
    main()
