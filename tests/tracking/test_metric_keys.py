"""Metric names MLflow refuses: a MATH category ("Counting & Probability") must not cost a run its MLflow metrics."""

import mlflow

from hacrl_exp.config.schema import TrackingConfig
from hacrl_exp.tracking.tracker import MlflowTracker, mlflow_key


def test_a_category_with_an_ampersand_is_logged_under_a_name_mlflow_takes(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(TrackingConfig(uri=uri, experiment="keys"), {"seed": 0}, ["a"], {})
    tracker.log(1, {"train/p_hat/Counting & Probability": 0.25, "train/p_hat": 0.5}, "a")
    tracker.flush()
    assert not tracker.down  # one refused name used to make MLflow refuse the whole batch, and the store "down"
    tracker.close()
    logged = mlflow.MlflowClient(uri).get_run(tracker.run_ids["a"]).data.metrics
    assert logged == {"train/p_hat/Counting _ Probability": 0.25, "train/p_hat": 0.5}
    assert mlflow_key("cross/from_gpt2-bpe/omega: x.y") == "cross/from_gpt2-bpe/omega: x.y"  # allowed ones stay
