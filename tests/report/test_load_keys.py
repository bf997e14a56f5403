"""The report reads the metric keys of docs/metrics.md and, for runs logged before them, the old keys."""

import pytest

from hacrl_exp.report.load import curve_name


@pytest.mark.parametrize(
    "key, name",
    [
        ("train/reward_mean", "reward/mean"),
        ("reward/mean", "reward/mean"),
        ("train/rollouts_total", "rollouts_total"),
        ("rollouts_total", "rollouts_total"),
        ("train/tokens_total", "tokens_total"),
        ("cross/omega", "cross/omega"),
        ("omega/gpt2_bpe", "cross/omega"),
        ("train/p_hat", "train/p_hat"),
        ("capability/p_hat", "train/p_hat"),
        ("cross/in_window_share", "cross/in_window_share"),
        ("cross/gpt2_bpe/in_window", "cross/in_window_share"),
        ("eval/accuracy/add3", "eval/accuracy/add3"),
        ("train/loss", None),
        ("cross/from_gpt2_bpe/omega", None),  # per source: the report plots the learner's mean
        ("cross/in_window_share/u0", None),
    ],
)
def test_curve_names_of_new_and_old_keys(key, name):
    assert curve_name(key) == name


class _Metric:
    def __init__(self, step, value):
        self.step, self.value = step, value


class _Client:
    """Two old-style sources of one learner and the old parent step time: averaged, and summed into seconds."""

    def __init__(self, metrics):
        self.metrics = metrics

    def get_run(self, run_id):
        data = type("D", (), {"metrics": dict.fromkeys(self.metrics[run_id], 0.0)})
        return type("R", (), {"data": data})

    def get_metric_history(self, run_id, key):
        return [_Metric(s, v) for s, v in self.metrics[run_id].get(key, [])]


def test_old_per_source_keys_average_and_old_step_time_sums():
    import pandas as pd

    from hacrl_exp.report.load import load_curves

    client = _Client(
        {
            "a": {"omega/x": [(1, 1.0)], "omega/y": [(1, 3.0)], "rollouts_total": [(1, 8.0)]},
            "p": {"time/step": [(1, 2.0), (2, 3.0)]},
        }
    )
    curves = load_curves(client, pd.DataFrame({"run_id": ["a"], "parent_id": ["p"]}))
    value = curves.set_index(["metric", "step"])["value"]
    assert value[("cross/omega", 1)] == 2.0 and value[("rollouts_total", 1)] == 8.0
    assert value[("seconds", 2)] == 5.0


def test_a_filter_mlflow_cannot_parse_is_one_line_naming_the_key(tmp_path):
    """`filter=` goes to MLflow's search; what it cannot parse (IN over params) is a ConfigError naming `filter`,
    not MLflow's traceback. Before: every filter failed so, wrapped in parentheses, which MLflow does not parse."""
    from mlflow.tracking import MlflowClient

    from hacrl_exp.errors import ConfigError
    from hacrl_exp.report.load import search_runs

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("grid")
    with pytest.raises(ConfigError, match=r"^filter=\"params.seed IN \('0', '1'\)\": MLflow cannot search with it"):
        search_runs(client, [experiment], {"grid": "g"}, "params.seed IN ('0', '1')")
    agents, parents = search_runs(client, [experiment], {"grid": "g"}, "params.seed != '9'")  # a filter it takes
    assert agents.empty and parents.empty
