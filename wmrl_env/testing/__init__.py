"""Conformance suites that every implementation of a wmrl-env interface runs.

Like ``dm_env.test_utils``: subclass the mixin in a test module, implement its ``make_*``
hooks, and pytest collects the shared tests for your backend.

Example (in ``tests/sandboxes/test_my_executor.py``)::

    class TestMyExecutor(ExecutorContract):
        def make_executor(self): return MyExecutor()
        def make_ok_job(self, i): return Job(program=..., scorer=...)
        def expected_score(self, i): return float(i)
        def make_failing_job(self): return Job(program="raise SystemExit(3)")
"""

from wmrl_env.testing.executor_contract import ExecutorContract
from wmrl_env.testing.round_contract import AnchoredRoundContract
from wmrl_env.testing.snapshot_contract import SnapshotContract
from wmrl_env.testing.world_model_contract import DynamicsWorldModelContract, WorldModelContract

__all__ = [
    "AnchoredRoundContract",
    "DynamicsWorldModelContract",
    "ExecutorContract",
    "SnapshotContract",
    "WorldModelContract",
]
