"""The anchored round every integration plays (the vector env, the single-env wrapper,
TRL's reward, verl's reward manager and estimator): :class:`AnchoredRound` plans a round
from the world model's prediction (anchor draw, screening, forced groups, known outcomes,
with exact inclusion probabilities) and finishes it from the real results (the real record,
the circuit breaker, the fusion, the metrics); the pieces it shares with per-sample scoring:
the fate of a single sample and the task each group belongs to."""

from wmrl_env.rounds.clusters import task_cluster
from wmrl_env.rounds.engine import AnchoredRound
from wmrl_env.rounds.finish import ROUND_METRICS, FinishedRound, round_metrics
from wmrl_env.rounds.health import (
    DEFAULT_MAX_INFRASTRUCTURE_FAILURES,
    InfrastructureFailureError,
    InfrastructureHealth,
)
from wmrl_env.rounds.plan import ANCHOR_PRIORITIES, AnchorSelection, RoundPlan, known_outcomes
from wmrl_env.rounds.record import NOT_EXECUTED, RealRecord
from wmrl_env.rounds.samples import SampleOutcome, must_execute, sample_outcome

__all__ = [
    "ANCHOR_PRIORITIES",
    "DEFAULT_MAX_INFRASTRUCTURE_FAILURES",
    "NOT_EXECUTED",
    "ROUND_METRICS",
    "AnchorSelection",
    "AnchoredRound",
    "FinishedRound",
    "InfrastructureFailureError",
    "InfrastructureHealth",
    "RealRecord",
    "RoundPlan",
    "SampleOutcome",
    "known_outcomes",
    "must_execute",
    "round_metrics",
    "sample_outcome",
    "task_cluster",
]
