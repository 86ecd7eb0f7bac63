"""``wmrl train-world-model``: train a world model on an execution log.

Backends:

* ``embedding``: fits an
  :class:`~wmrl_env.world_models.embeddings.embedding_regressor.EmbeddingRegressor` and saves it
  (``EmbeddingRegressor.load(OUT)``).
* ``profile`` (the ML world model v3, the default): fits a
  :class:`~wmrl_env.world_models.programs.program_profile.ProgramProfileWorldModel` (program syntax
  and task features, plus how the suite's 72 structured programs co-vary across tasks) and
  saves one pickle (``load_default_ml_world_model(OUT)``).
* ``program`` (the ML world model v2): fits a
  :class:`~wmrl_env.world_models.programs.program_task.ProgramTaskWorldModel` on program syntax and
  task features and saves one pickle (``load_ml_world_model("v2", OUT)``).

For both, ``--table-split SPLIT`` (or ``wm,train``) reads the committed execution table's
rows of those splits instead of a log; contexts must be task descriptions.
* ``causal-lm``: LoRA fine-tuning of a causal LM scorer
  (:func:`~wmrl_env.world_models.lm.lora.finetune_lora`); saves the adapter and the scorer
  configuration (``CausalLMScorer.load(OUT)``), or with ``--merge`` a plain model directory.

The log is a CSV or SQLite file (:func:`~wmrl_env.world_models.training_data.read_training_pairs`);
``--contexts`` names a JSON file mapping task ids to task descriptions. A JSON summary is
printed on stdout.

Example:
    $ wmrl train-world-model --backend profile --table-split wm,train \\
          --out wmrl_env/world_models/programs/pretrained/ml_program_profile_v3.npz
    $ wmrl train-world-model runs/log.sqlite --backend causal-lm --model ./qwen-0.5b \\
          --contexts tasks.json --epochs 2 --out runs/wm-lora
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    from wmrl_env.world_models.embeddings.heads import HEADS
    from wmrl_env.world_models.lm.lora import LoraTrainingConfig

    parser = subparsers.add_parser(
        "train-world-model",
        help="train a world model (ML v3 profile, ML v2 program, embedding regressor or "
        "LoRA causal LM)",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "log", nargs="?", help="execution log: .csv, or .sqlite/.sqlite3/.db (or --table-split)"
    )
    parser.add_argument(
        "--out", required=True, help="where to save: a directory (a .npz file: profile, program)"
    )
    parser.add_argument(
        "--backend", choices=("profile", "program", "embedding", "causal-lm"), default="profile"
    )
    parser.add_argument(
        "--table-split",
        help="profile/program: train on the committed execution table's tasks of this split "
        "(wm) or splits (wm,train) instead of a log",
    )
    parser.add_argument(
        "--table-tasks",
        help="profile/program: train on these tasks of the committed execution table "
        "(comma-separated)",
    )
    parser.add_argument(
        "--model",
        help="model directory: the encoder (embedding; default all-MiniLM-L6-v2) "
        "or the causal LM (causal-lm; required)",
    )
    parser.add_argument("--contexts", help="JSON file: task id -> task description")
    parser.add_argument("--table", default="executions", help="SQLite table to read")
    parser.add_argument(
        "--score-range", nargs=2, type=float, default=(0.0, 1.0), metavar=("LOW", "HIGH")
    )
    parser.add_argument("--head", choices=HEADS, default=None, help="embedding head")
    parser.add_argument("--max-length", type=int, default=None, help="tokens kept per text")
    parser.add_argument("--merge", action="store_true", help="causal-lm: merge LoRA into weights")
    for config_field in dataclasses.fields(LoraTrainingConfig):
        if config_field.name == "target_modules":
            parser.add_argument(
                "--target-modules",
                nargs="+",
                default=list(config_field.default),
                help=config_field.metadata["help"],
            )
            continue
        parser.add_argument(
            "--" + config_field.name.replace("_", "-"),
            type=type(config_field.default),
            default=config_field.default,
            help=f"causal-lm: {config_field.metadata['help']} (default {config_field.default})",
        )
    parser.set_defaults(func=run)


def _train_embedding(args: argparse.Namespace, pairs: Any) -> dict[str, Any]:
    from wmrl_env.world_models.embeddings.embedding_regressor import (
        DEFAULT_HEAD,
        EmbeddingRegressor,
    )
    from wmrl_env.world_models.embeddings.encoder import TextEncoder

    encoder_kwargs = {"max_length": args.max_length} if args.max_length else {}
    encoder = TextEncoder(args.model, **encoder_kwargs)
    model = EmbeddingRegressor(
        encoder, head=args.head or DEFAULT_HEAD, score_range=tuple(args.score_range), seed=args.seed
    )
    model.fit(pairs.contexts, pairs.artifacts, pairs.scores)
    model.save(args.out)
    return {"head": model.head_name, "n_pairs": model.n_pairs}


def _train_program(args: argparse.Namespace, pairs: Any) -> dict[str, Any]:
    from wmrl_env.envs.ml_tasks.features import TASK_FEATURE_NAMES, context_features
    from wmrl_env.world_models.programs.program_task import ProgramTaskWorldModel

    model = ProgramTaskWorldModel(
        context_features, TASK_FEATURE_NAMES, score_range=tuple(args.score_range), seed=args.seed
    )
    model.fit(pairs.contexts, pairs.artifacts, pairs.scores)
    model.save(args.out)
    return {
        "n_pairs": len(pairs),
        "n_tasks": len(set(pairs.groups)),
        "residual_prior": {
            "bias": model.prior.bias,
            "signal": model.prior.signal,
            "noise": model.prior.noise,
            "inverse_lengths": sorted({round(float(w), 4) for w in model.prior.weights}),
        },
        "shape_weight": model.shape_weight,
        "std_scale": model.std_scale,
    }


def _train_profile(args: argparse.Namespace, pairs: Any) -> dict[str, Any]:
    from wmrl_env.world_models.programs.ml_default import new_ml_world_model

    model = new_ml_world_model("v3", score_range=tuple(args.score_range), seed=args.seed)
    model.fit(pairs.contexts, pairs.artifacts, pairs.scores)
    model.save(args.out)
    return {
        "n_pairs": len(pairs),
        "n_tasks": len(set(pairs.groups)),
        "covariance_source": model.covariance_source,
        "shrinkage": model.shrinkage,
        "noise_share": model.noise_share,
        "std_scale": model.std_scale,
    }


def _table_pairs(args: argparse.Namespace) -> Any:
    import numpy as np

    from wmrl_env.world_models.programs.ml_default import pretraining_tasks, table_training_pairs
    from wmrl_env.world_models.training_data import TrainingPairs

    if args.table_tasks:
        tasks = tuple(t.strip() for t in args.table_tasks.split(",") if t.strip())
    else:
        tasks = pretraining_tasks(args.table_split)
    contexts, programs, scores = table_training_pairs(tasks)
    groups = [context.split(":", 1)[0] for context in contexts]
    return TrainingPairs(contexts, programs, np.asarray(scores), groups, 0)


def _train_causal_lm(args: argparse.Namespace, pairs: Any) -> dict[str, Any]:
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
    from wmrl_env.world_models.lm.lora import LoraTrainingConfig, finetune_lora
    from wmrl_env.world_models.lm.prompting import ScorePrompt
    from wmrl_env.world_models.lm.score_bins import ScoreBins

    if not args.model:
        raise ValueError("--model is required for --backend causal-lm")
    names = {f.name for f in dataclasses.fields(LoraTrainingConfig)}
    config = LoraTrainingConfig(**{name: getattr(args, name) for name in names})
    prompt = ScorePrompt(bins=ScoreBins(score_range=tuple(args.score_range)))
    scorer_kwargs = {"max_length": args.max_length} if args.max_length else {}
    scorer = CausalLMScorer(args.model, prompt=prompt, **scorer_kwargs)
    report = finetune_lora(scorer, pairs.contexts, pairs.artifacts, pairs.scores, config)
    scorer.save(args.out, merge=args.merge)
    return {
        "n_train": report.n_train,
        "n_eval": report.n_eval,
        "eval_loss_before": report.eval_loss_before,
        "eval_loss_after": report.eval_loss_after,
        "first_loss": report.losses[0],
        "last_loss": report.losses[-1],
    }


def run(args: argparse.Namespace) -> int:
    from wmrl_env.world_models.training_data import read_training_pairs

    try:
        contexts = None
        if args.contexts:
            with open(args.contexts, encoding="utf-8") as handle:
                contexts = json.load(handle)
        if args.table_split or args.table_tasks:
            if args.backend not in ("profile", "program") or args.log:
                raise ValueError(
                    "--table-split/--table-tasks need --backend profile or program and no LOG"
                )
            pairs = _table_pairs(args)
        elif args.log:
            pairs = read_training_pairs(args.log, contexts=contexts, table=args.table)
        else:
            raise ValueError("give an execution LOG (or --table-split SPLIT)")
        if len(pairs) < 2:
            raise ValueError(f"{args.log} holds {len(pairs)} scored pairs; at least 2 are needed")
        train = {
            "profile": _train_profile,
            "program": _train_program,
            "embedding": _train_embedding,
            "causal-lm": _train_causal_lm,
        }[args.backend]
        summary = {"backend": args.backend, "out": args.out, "n_skipped": pairs.n_skipped}
        summary.update(train(args, pairs))
    except (ValueError, FileNotFoundError) as error:
        print(f"wmrl train-world-model: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    return 0
