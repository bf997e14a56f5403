"""The evaluate command's closing table: a headline metric that was skipped (too few samples) does not crash it."""

import pandas as pd

from hacrl_exp.evaluation.pipeline import headline_table


def summary_rows(benchmark: str, metrics: dict[str, float]) -> list[dict]:
    counts = {"problems": 1.0, "samples_per_problem": 1.0, "no_answer_rate": 1.0, "timeouts": 0.0}
    return [
        {"agent": "a", "step": 1, "benchmark": benchmark, "metric": m, "value": v, "ci_low": v, "ci_high": v}
        for m, v in {**metrics, **counts}.items()
    ]


def test_a_skipped_headline_names_the_metric_that_stands_in():
    """`evaluate benchmarks=[aime2025] samples=1`: best@30 needs 30 samples and is skipped; pass@1 stands in."""
    summary = pd.DataFrame(summary_rows("aime2025", {"pass_at_1": 0.0}) + summary_rows("gsm8k", {"accuracy": 0.5}))
    table = headline_table(summary)
    assert "| pass_at_1 (best_at_30 skipped: 1 sample(s)) | 0.000 [0.000, 0.000] |" in table
    assert "| accuracy | 0.500 [0.500, 0.500] |" in table
