"""What every anchored round shares, whichever integration plays it (the vector env, TRL's
reward, verl's reward manager and estimator, the per-task bench): the circuit breaker on
infrastructure failures, the fate of a single sample (executed or not, with which inclusion
probability, as evidence or as a known outcome), and the task each group belongs to."""

from wmrl_env.rounds.clusters import task_cluster
from wmrl_env.rounds.health import (
    DEFAULT_MAX_INFRASTRUCTURE_FAILURES,
    InfrastructureFailureError,
    InfrastructureHealth,
)
from wmrl_env.rounds.samples import SampleOutcome, must_execute, sample_outcome

__all__ = [
    "DEFAULT_MAX_INFRASTRUCTURE_FAILURES",
    "InfrastructureFailureError",
    "InfrastructureHealth",
    "SampleOutcome",
    "must_execute",
    "sample_outcome",
    "task_cluster",
]
