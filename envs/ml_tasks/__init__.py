"""The AutoResearch ML task suite: real tabular tasks, sandboxed scoring, execution tables.

An agent reads a task description, writes a program that trains a model on
``inputs/train.csv`` and writes ``predictions.csv`` for ``inputs/test.csv``; the program runs
in a sandbox and the host scores it against labels the program never sees.

Importing this package registers two gymnasium environments:

* ``wmrl/MLTask-v0``: live execution (local process sandbox), text actions by default;
* ``wmrl/MLTaskReplay-v0``: structured actions answered from the committed execution table;
* ``wmrl/MLTaskMultiTurn-v0`` and ``wmrl/MLTaskMultiTurnReplay-v0``: the same task over up to
  ``max_turns`` programs, each turn observing the previous run's report
  (:class:`~wmrl_env.envs.ml_tasks.multiturn.MLTaskMultiTurnEnv`).

The tasks form three disjoint splits, ``task_ids("wm")`` (world-model pretraining),
``task_ids("train")`` (policy post-training) and ``task_ids("heldout")`` (evaluation); the
constants ``WM_TASKS``, ``TRAIN_TASKS``, ``HELDOUT_TASKS`` and ``ALL_TASKS`` hold the same.

Example:
    >>> import gymnasium as gym
    >>> import wmrl_env.envs.ml_tasks
    >>> env = gym.make("wmrl/MLTaskReplay-v0", tasks="heldout")
    >>> description, info = env.reset(seed=1, options={"task_id": "wine"})
    >>> _, reward, *_ = env.step([1, 0, 1])  # standardize-linear-mid, from the table
    >>> len(task_ids("wm")) >= 80 and 0.0 <= reward <= 1.0
    True
    >>> env.close()
"""

from gymnasium.envs import registration

from . import registry
from .env import MLTaskEnv
from .multiturn import STOP, MLTaskMultiTurnEnv
from .programs import ProgramSpec, all_programs, program_space, render_program
from .registry import get_task, task_ids
from .reviser import ScriptedReviser
from .scoring import normalised_score
from .tables import ExecutionTable, TableRow, load_table
from .tasks import MLTask

__all__ = [
    "ALL_TASKS",
    "HELDOUT_TASKS",
    "STOP",
    "TRAIN_TASKS",
    "WM_TASKS",
    "ExecutionTable",
    "MLTask",
    "MLTaskEnv",
    "MLTaskMultiTurnEnv",
    "ProgramSpec",
    "ScriptedReviser",
    "TableRow",
    "all_programs",
    "get_task",
    "load_table",
    "normalised_score",
    "program_space",
    "render_program",
    "task_ids",
]


def __getattr__(name: str) -> tuple[str, ...]:
    """The split constants (``TRAIN_TASKS``, ...), read from the manifest on first use."""
    return getattr(registry, name)


_ENTRY_POINT = "wmrl_env.envs.ml_tasks.env:MLTaskEnv"
if "wmrl/MLTask-v0" not in registration.registry:
    # live execution: exec seconds and output tails differ between runs
    registration.register(id="wmrl/MLTask-v0", entry_point=_ENTRY_POINT, nondeterministic=True)
if "wmrl/MLTaskReplay-v0" not in registration.registry:
    registration.register(
        id="wmrl/MLTaskReplay-v0",
        entry_point=_ENTRY_POINT,
        kwargs={"executor": "replay", "action_mode": "structured"},
    )

_MULTITURN_ENTRY_POINT = "wmrl_env.envs.ml_tasks.multiturn:MLTaskMultiTurnEnv"
if "wmrl/MLTaskMultiTurn-v0" not in registration.registry:
    registration.register(
        id="wmrl/MLTaskMultiTurn-v0", entry_point=_MULTITURN_ENTRY_POINT, nondeterministic=True
    )
if "wmrl/MLTaskMultiTurnReplay-v0" not in registration.registry:
    registration.register(
        id="wmrl/MLTaskMultiTurnReplay-v0",
        entry_point=_MULTITURN_ENTRY_POINT,
        kwargs={"executor": "replay"},
    )
