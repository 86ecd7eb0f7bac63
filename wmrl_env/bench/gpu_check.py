"""GPU readiness: throughput of the language-model paths on random-weight models of real size.

Throughput does not depend on the weights, so no download is needed: each size is a
``Qwen2Config`` (``0.5b``: Qwen2.5-0.5B's shape; ``4b``: a Qwen3-4B-like shape; ``tiny``: for
tests on a CPU) with a tokenizer trained here on the ML suite's text, and random weights.
For each size :func:`run_gpu_check` measures

* ``vllm``: :class:`~wmrl_env.world_models.lm.vllm_backend.VLLMScorer` programs scored per second
  (needs vLLM and a CUDA GPU; otherwise skipped with the reason, never faked);
* ``causal_lm``: :class:`~wmrl_env.world_models.lm.causal_lm.CausalLMScorer`, seconds per
  forward pass of one batch of (task, program) prompts, and programs per second;
* ``online``: seconds per online ``update()`` of the scorer (a bounded LoRA step on 32 anchor
  pairs: 4 AdamW steps of 16) and the LoRA parameters it trains;
* ``vllm_online``: the same update served by vLLM through a LoRA adapter (``enable_lora``),
  seconds per update (training, saving, the next prediction loading it) and the largest
  difference between vLLM's and the trainer's expected scores after it (needs vLLM and CUDA);
* ``grpo``: one TRL GRPO step of the model as the policy
  (:class:`~wmrl_env.integrations.trl.WMRLGRPOTrainer`) rewarded by
  :class:`~wmrl_env.integrations.trl.WorldModelReward` (world model v2, anchors replayed
  from the execution table or run in the local sandbox), seconds per step;

and writes one JSON of figures (``scripts/gpu-check.sh`` runs it).

Example (needs the ``trl`` extra)::

    figures = run_gpu_check(["tiny"], out="runs/gpu_check.json", device="cpu")
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wmrl_env.utils.imports import is_available, require

__all__ = ["SIZES", "build_random_model", "run_gpu_check"]

#: size name -> Qwen2Config fields (vocabulary: the real models' 151,936 except ``tiny``)
SIZES: dict[str, dict[str, int]] = {
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=4096,
    ),
    "0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
    ),
    "4b": dict(
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=151936,
    ),
}


def _prompts(n: int) -> tuple[list[str], list[str], list[str]]:
    """``n`` (task description, program, task id) triples from the suite's grid."""
    from wmrl_env.envs.ml_tasks import all_programs, get_task, render_program, task_ids

    tasks = task_ids("heldout")[:4]
    programs = all_programs()
    rows = [(tasks[i % len(tasks)], programs[(7 * i) % len(programs)]) for i in range(n)]
    return (
        [get_task(t).description for t, _ in rows],
        [render_program(p, get_task(t).kind) for t, p in rows],
        [t for t, _ in rows],
    )


def build_random_model(size: str, path: str | Path, device: str = "cpu") -> Path:
    """Save a random-weight Qwen2 model of ``size`` (bfloat16 on a GPU) and a tokenizer
    trained on the suite's text to ``path``; returns ``path``."""
    torch = require("torch", "build_random_model")
    transformers = require("transformers", "build_random_model")
    from wmrl_env.code_policy.model import train_code_tokenizer

    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    descriptions, programs, _ = _prompts(64)
    tokenizer = train_code_tokenizer(
        descriptions + programs + ["Score: 0 1 2 3 4 5 6 7 8 9"], vocab_size=1024
    )
    config = transformers.Qwen2Config(
        **SIZES[size],
        max_position_embeddings=4096,
        tie_word_embeddings=size != "4b",
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(0)
        model = transformers.Qwen2ForCausalLM(config).to(dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # generation must stay inside the tokenizer (the embedding is the real model's size)
    model.generation_config.suppress_tokens = list(range(len(tokenizer), config.vocab_size))
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return Path(path)


def _vllm_figures(path: Path, pairs: tuple[list[str], list[str]], device: str) -> dict[str, Any]:
    if not is_available("vllm"):
        return {"skipped": "vllm is not installed (pip install 'wmrl-env[vllm]' on a GPU machine)"}
    if not device.startswith("cuda"):
        return {"skipped": "no CUDA GPU: the vLLM check measures the GPU engine only"}
    from wmrl_env.world_models.lm.vllm_backend import VLLMScorer

    scorer = VLLMScorer(
        path,
        llm_kwargs={"dtype": "bfloat16", "gpu_memory_utilization": 0.35, "max_model_len": 2048},
    )
    contexts, artifacts = pairs
    scorer.predict(contexts[:8], artifacts[:8])  # warm-up: compile, caches
    start = time.perf_counter()
    scorer.predict(contexts, artifacts)
    seconds = time.perf_counter() - start
    del scorer
    return {
        "programs": len(contexts),
        "seconds": seconds,
        "programs_per_s": len(contexts) / seconds,
    }


def _causal_lm_figures(
    path: Path, pairs: tuple[list[str], list[str]], device: str, batch_size: int
) -> dict[str, Any]:
    torch = require("torch")
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer

    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    scorer = CausalLMScorer(path, batch_size=batch_size, device=device, dtype=dtype)
    contexts, artifacts = pairs
    prompts = [scorer.prompt.render(c, a) for c, a in zip(contexts, artifacts, strict=True)]
    scorer.score_log_probs(prompts[:batch_size])  # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    scorer.score_log_probs(prompts)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = [len(scorer.tokenizer(p)["input_ids"]) for p in prompts]
    batches = -(-len(prompts) // batch_size)
    del scorer
    return {
        "batch_size": batch_size,
        "mean_prompt_tokens": sum(tokens) / len(tokens),
        "seconds_per_batch": seconds / batches,
        "programs_per_s": len(prompts) / seconds,
    }


def _anchors(pairs: tuple[list[str], list[str]], n: int = 32) -> tuple[list[str], ...]:
    contexts, artifacts = pairs
    return contexts[:n], artifacts[:n], [(7 * i % 11) / 10 for i in range(min(n, len(contexts)))]


def _online_figures(
    path: Path, pairs: tuple[list[str], list[str]], device: str, rounds: int = 3
) -> dict[str, Any]:
    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer

    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    scorer = CausalLMScorer(path, device=device, dtype=dtype, min_score_mass=0.0)
    contexts, artifacts, real = _anchors(pairs)
    seconds = []
    for _ in range(rounds):  # the first adds the adapters
        start = time.perf_counter()
        report = scorer.update(contexts, artifacts, real)
        seconds.append(time.perf_counter() - start)
    return {
        "anchors": len(contexts),
        "steps": report.steps,
        "first_update_seconds": seconds[0],
        "update_seconds": seconds[-1],
        "trainable_parameters": report.trainable_parameters,
    }


def _vllm_online_figures(
    path: Path, pairs: tuple[list[str], list[str]], device: str
) -> dict[str, Any]:
    if not is_available("vllm"):
        return {"skipped": "vllm is not installed (pip install 'wmrl-env[vllm]' on a GPU machine)"}
    if not device.startswith("cuda"):
        return {"skipped": "no CUDA GPU: the vLLM check measures the GPU engine only"}
    import numpy as np

    from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
    from wmrl_env.world_models.lm.vllm_backend import VLLMScorer

    trainer = CausalLMScorer(path, device=device, dtype="bfloat16", min_score_mass=0.0)
    llm_kwargs = {
        "dtype": "bfloat16",
        "gpu_memory_utilization": 0.3,
        "max_model_len": 2048,
        "enable_lora": True,
        "max_lora_rank": trainer.learner.config.rank,
        "max_logprobs": len(trainer.tokenizer),
    }
    scorer = VLLMScorer(
        path,
        llm_kwargs=llm_kwargs,
        trainer=trainer,
        min_score_mass=0.0,
        logprobs=len(trainer.tokenizer),
    )
    contexts, artifacts, real = _anchors(pairs)
    start = time.perf_counter()
    scorer.update(contexts, artifacts, real)
    served = scorer.predict(contexts, artifacts)  # loads the new adapter
    seconds = time.perf_counter() - start
    reference = trainer.predict(contexts, artifacts)
    del scorer
    return {
        "anchors": len(contexts),
        "update_and_predict_seconds": seconds,
        "max_score_difference_to_trainer": float(np.max(np.abs(served.scores - reference.scores))),
    }


def _grpo_figures(path: Path, device: str, num_generations: int, tmp: Path) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from wmrl_env.code_policy import ReplayOrLiveExecutor, ScoreProgramFailures, task_prompt
    from wmrl_env.envs.ml_tasks import get_task, load_table
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
    from wmrl_env.fusion import RewardFusion
    from wmrl_env.integrations.trl import WMRLGRPOTrainer, WorldModelReward
    from wmrl_env.world_models import load_default_ml_world_model

    _, _, tasks = _prompts(2)
    dataset = Dataset.from_dict({"prompt": [task_prompt(t) for t in tasks], "task_id": tasks})
    executor = ScoreProgramFailures(
        ReplayOrLiveExecutor(load_table().replay_executor(), default_sandbox(2))
    )
    reward = WorldModelReward(
        load_default_ml_world_model(),
        executor,
        to_job=lambda prompt, completion, task_id: get_task(task_id).make_job(completion),
        to_context=lambda prompt, task_id: get_task(task_id).description,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0),
    )
    cuda = device.startswith("cuda")
    config = GRPOConfig(
        output_dir=str(tmp / "grpo"),
        per_device_train_batch_size=len(tasks) * num_generations,
        num_generations=num_generations,
        max_completion_length=64,
        max_steps=2,
        learning_rate=1e-6,
        beta=0.0,
        scale_rewards="none",
        save_strategy="no",
        report_to=[],
        use_cpu=not cuda,
        bf16=cuda,
        seed=0,
        log_completions=False,
    )
    trainer = WMRLGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path),
        reward=reward,
        args=config,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(path, padding_side="left"),
    )
    seconds: list[float] = []

    class Timer(require("transformers").TrainerCallback):
        def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            seconds.append(time.perf_counter() - self.start)

    trainer.add_callback(Timer())
    try:
        trainer.train()
    finally:
        executor.close()
    return {
        "completions_per_step": config.per_device_train_batch_size,
        "max_completion_length": config.max_completion_length,
        "first_step_seconds": seconds[0],
        "step_seconds": seconds[-1],  # the second step: warm
        "real_executions": reward.n_executed,
    }


def run_gpu_check(
    sizes: Sequence[str] = ("0.5b", "4b"),
    out: str | Path = "runs/gpu_check.json",
    device: str | None = None,
    num_programs: int = 256,
    batch_size: int = 32,
    grpo_sizes: Sequence[str] = ("0.5b", "tiny"),
    num_generations: int = 8,
) -> dict[str, Any]:
    """Measure every path for every size and write the figures to ``out`` (JSON).

    ``device`` defaults to ``cuda`` where torch sees a GPU, else ``cpu``. The GRPO step runs
    for the sizes in ``grpo_sizes`` only (a full-parameter step of the 4B shape needs about
    64 GB for AdamW's state). A part that fails is recorded with its error, and the others
    still run.
    """
    torch = require("torch", "run_gpu_check")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    figures: dict[str, Any] = {
        "device": (
            torch.cuda.get_device_name(0)
            if device.startswith("cuda")
            else f"cpu ({platform.machine()}, {os.cpu_count()} cores)"
        ),
        "torch": torch.__version__,
        "load_average": os.getloadavg(),
        "num_programs": num_programs,
        "sizes": {},
    }
    descriptions, programs, _ = _prompts(num_programs)
    options = {
        "batch_size": batch_size,
        "grpo_sizes": grpo_sizes,
        "num_generations": num_generations,
    }
    for size in sizes:
        entry: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix=f"wmrl-gpu-{size}-") as tmp:
            start = time.perf_counter()
            path = build_random_model(size, Path(tmp) / "model", device)
            entry["build_seconds"] = time.perf_counter() - start
            entry["parameters"] = _parameters(path)
            parts = _parts(size, path, (descriptions, programs), device, Path(tmp), options)
            for name, measure in parts.items():
                try:
                    entry[name] = measure()
                except Exception as error:  # recorded: the other parts still run
                    entry[name] = {"error": f"{type(error).__name__}: {error}"}
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()
        figures["sizes"][size] = entry
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def _parts(
    size: str,
    path: Path,
    pairs: tuple[list[str], list[str]],
    device: str,
    tmp: Path,
    options: dict[str, Any],
) -> dict[str, Any]:
    """The measurements of one size, each a call that returns its figures."""
    grpo_sizes = list(options["grpo_sizes"])
    return {
        "vllm": lambda: _vllm_figures(path, pairs, device),
        "causal_lm": lambda: _causal_lm_figures(path, pairs, device, options["batch_size"]),
        "online": lambda: _online_figures(path, pairs, device),
        "vllm_online": lambda: _vllm_online_figures(path, pairs, device),
        "grpo": lambda: (
            _grpo_figures(path, device, options["num_generations"], tmp)
            if size in grpo_sizes
            else {"skipped": f"size {size!r} is not in grpo_sizes {grpo_sizes}"}
        ),
    }


def _parameters(path: Path) -> int:
    config = json.loads((path / "config.json").read_text())
    h, layers, vocab = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]
    kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
    per_layer = h * (2 * h + 2 * kv) + 3 * h * config["intermediate_size"]
    untied = 0 if config.get("tie_word_embeddings") else vocab * h
    return layers * per_layer + vocab * h + untied


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.5b,4b", help="comma-separated: tiny, 0.5b, 4b")
    parser.add_argument("--grpo-sizes", default="0.5b,tiny", help="sizes that run a GRPO step")
    parser.add_argument("--out", default="runs/gpu_check.json")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda if seen)")
    parser.add_argument("--num-programs", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    figures = run_gpu_check(
        args.sizes.split(","),
        args.out,
        args.device,
        args.num_programs,
        args.batch_size,
        args.grpo_sizes.split(","),
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
