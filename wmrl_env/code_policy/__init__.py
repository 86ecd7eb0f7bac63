"""A small language model that writes the ML suite's solution programs, for TRL GRPO.

* :mod:`.drafts`: :class:`ProgramDraft` and :func:`render_draft`: the 72-program grid and
  recombinations of its pieces (other hyperparameter values, other step orders);
* :mod:`.data`: :func:`task_prompt` and the behaviour-cloning pairs :func:`bc_pairs`;
* :mod:`.model`: :func:`train_code_tokenizer` (BPE with ``tokenizers``) and
  :func:`build_code_model` (a GPT-2 from a config);
* :mod:`.behaviour_cloning`: :func:`make_code_policy`, all of it in one call, cached on disk;
* :mod:`.executors`: :class:`ReplayOrLiveExecutor` (table replay, else live) and
  :class:`ScoreProgramFailures`;
* :mod:`.evaluation`: :func:`sample_programs`, :func:`execute_programs`, :func:`summarise`.

torch, transformers and tokenizers are imported only when a function needs them.

Example:
    >>> from wmrl_env.code_policy import task_prompt
    >>> task_prompt("diabetes").splitlines()[0]
    'Task diabetes: regression, metric r2, 442 rows, 10 features.'
"""

from wmrl_env.code_policy.behaviour_cloning import (
    CodePolicyRecipe,
    clone_programs,
    make_code_policy,
)
from wmrl_env.code_policy.data import bc_pairs, task_prompt
from wmrl_env.code_policy.drafts import (
    PREPROCESSING_ORDERS,
    STEPS,
    ProgramDraft,
    model_arguments,
    render_draft,
    sample_draft,
)
from wmrl_env.code_policy.evaluation import (
    ProgramOutcome,
    execute_programs,
    grid_hashes,
    parses,
    sample_programs,
    summarise,
)
from wmrl_env.code_policy.executors import ReplayOrLiveExecutor, ScoreProgramFailures
from wmrl_env.code_policy.model import build_code_model, train_code_tokenizer

__all__ = [
    "PREPROCESSING_ORDERS",
    "STEPS",
    "CodePolicyRecipe",
    "ProgramDraft",
    "ProgramOutcome",
    "ReplayOrLiveExecutor",
    "ScoreProgramFailures",
    "bc_pairs",
    "build_code_model",
    "clone_programs",
    "execute_programs",
    "grid_hashes",
    "make_code_policy",
    "model_arguments",
    "parses",
    "render_draft",
    "sample_draft",
    "sample_programs",
    "summarise",
    "task_prompt",
    "train_code_tokenizer",
]
