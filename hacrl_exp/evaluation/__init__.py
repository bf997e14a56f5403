"""The evaluation harness: benchmark YAMLs (top-level `evaluation/`), data, generation, grading, metrics, MLflow.

Light to import: `evaluate_agent`, `EvalSettings` and `EvalResult` (which pull in torch) load on first use.
"""

from __future__ import annotations

from hacrl_exp.evaluation.spec import BenchmarkSpec, known_benchmarks, load_benchmark

__all__ = ["BenchmarkSpec", "EvalResult", "EvalSettings", "evaluate_agent", "known_benchmarks", "load_benchmark"]


def __getattr__(name: str):
    if name in ("EvalResult", "EvalSettings", "evaluate_agent"):
        from hacrl_exp.evaluation import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'hacrl_exp.evaluation' has no attribute {name!r}")
