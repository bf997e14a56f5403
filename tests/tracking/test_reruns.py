"""A rerun of a job the store holds gets another name and configuration (hacrl_exp.tracking.open_job on a real
sqlite store), so no view averages it with its first run as if it were another seed."""

from mlflow.tracking import MlflowClient

from hacrl_exp.tracking import open_job
from hacrl_exp.trainer.validate import preflight


def test_the_same_job_twice_gets_r2_and_its_own_config(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = preflight([f"tracking.uri={uri}", "tracking.experiment=reruns"])
    ids = []
    for n in range(3):
        tracker = open_job(config, {}, tmp_path / f"run{n}")
        ids.append(tracker.run_ids[""])
        tracker.close()
    client = MlflowClient(uri)
    parents = [client.get_run(i) for i in ids]
    assert [p.info.run_name for p in parents] == [
        "hacpo-opt_char+gpt2_bpe-s0",
        "hacpo-opt_char+gpt2_bpe-s0-r2",
        "hacpo-opt_char+gpt2_bpe-s0-r3",
    ]
    configs = [p.data.tags["config"].split("@")[0] for p in parents]
    assert configs == ["hacpo-opt_char+gpt2_bpe", "hacpo-opt_char+gpt2_bpe-r2", "hacpo-opt_char+gpt2_bpe-r3"]
    assert parents[1].data.tags["job"] == "hacpo-opt_char+gpt2_bpe-s0-r2"
    child = client.get_run(open_job(config, {}, tmp_path / "run3").run_ids["opt_char"])
    assert child.info.run_name == "hacpo-opt_char+gpt2_bpe-s0-r4/opt_char"
