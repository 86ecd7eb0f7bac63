"""Language-model scorers, imported by module (the public names are in
:mod:`wmrl_env.world_models`: ``CausalLMScorer``, ``VLLMScorer``, ``OnlineLoraConfig``,
``ScoreBins``, ``ScorePrompt``, ``StatusPrompt``). Each imports its heavy dependency
(transformers, peft, vLLM) only when used.

- :mod:`~wmrl_env.world_models.lm.score_bins`: the score vocabulary a model answers in;
- :mod:`~wmrl_env.world_models.lm.prompting`: the prompt, and how its answer becomes a
  prediction;
- :mod:`~wmrl_env.world_models.lm.lora`: LoRA fine-tuning on execution logs;
- :mod:`~wmrl_env.world_models.lm.anchor_memory`: the anchors replayed by online learning;
- :mod:`~wmrl_env.world_models.lm.online_lora`: a bounded LoRA step per update;
- :mod:`~wmrl_env.world_models.lm.causal_lm` (transformers) and
  :mod:`~wmrl_env.world_models.lm.vllm_backend` (vLLM): the scorers;
- :mod:`~wmrl_env.world_models.lm.tiny_lm`: a tiny random model built offline, for tests.
"""

__all__: list[str] = []
