"""How faithful a world model is to real execution, measured before training with it.

``wmrl fidelity`` (:mod:`wmrl_env.cli.fidelity`) runs a world model's prediction contract
against held-out real executions (the ML suite's execution table, or a user's own durable
SQLite execution log) and reports status accuracy, failure AUC and calibration, score
error, std coverage, within-group Spearman on GRPO-sized groups, the noise ceiling where
programs ran more than once, and the real-execution saving the bench's quality curve
predicts at that quality.

Example:
    >>> from wmrl_env.world_models import load_default_ml_world_model
    >>> result = measure(load_default_ml_world_model(), suite_cases(tasks=["wine"]))
    >>> sorted(result.figures["status"])[:3]
    ['accuracy', 'confusion', 'crashes_with_a_known_class']
"""

from wmrl_env.fidelity.cases import Cases, log_cases, pool_cases, suite_cases
from wmrl_env.fidelity.measure import Fidelity, measure
from wmrl_env.fidelity.quality import curve_from_results, predicted_saving
from wmrl_env.fidelity.report import headline, write_json, write_plot

__all__ = [
    "Cases",
    "Fidelity",
    "curve_from_results",
    "headline",
    "log_cases",
    "measure",
    "pool_cases",
    "predicted_saving",
    "suite_cases",
    "write_json",
    "write_plot",
]
