"""A dress rehearsal of a run, offline on a CPU, before spending GPUs (`python -m hacrl_exp.rehearse`).

Each pretrained agent of the preset becomes a random-initialised model of its checkpoint's architecture class with
the real tokenizer, vocabulary, special tokens and positions, at a tiny width and depth; steps, prompts, G and the
evaluation sizes are cut; lengths are kept. Every stage of the real run then runs once, and rehearsal.md reports
what would break the run (errors, exit 2) or looks wrong (warnings), with the statistics of README's "Before you spend
GPUs". Modules: sources (where each agent's files come from; the per-checkpoint facts are agents.hub_checkpoints),
checks, stats, models (the stand-ins), stages, findings (rehearsal.md), pipeline (the order).
"""

from hacrl_exp.rehearsal.pipeline import rehearse

__all__ = ["rehearse"]
