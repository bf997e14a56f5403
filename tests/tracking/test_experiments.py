"""One experiment per name in a shared store (hacrl_exp.tracking): created once before side-by-side jobs start, and a
job that loses the race to create it reads the other job's experiment instead of failing."""

from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from hacrl_exp.tracking import create_stores
from hacrl_exp.tracking.names import EXPERIMENT_KIND
from hacrl_exp.tracking.store import experiment_id_and_tags
from hacrl_exp.tracking.views import FINAL_VIEW, VIEW_TAG, view_agents


class LateLookup(MlflowClient):
    """A client whose first lookup by name misses: what a job sees when another job creates the experiment between
    its lookup and its create."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.missed = False

    def get_experiment_by_name(self, name):
        if not self.missed:
            self.missed = True
            return None
        return super().get_experiment_by_name(name)


def test_a_job_that_loses_the_race_to_create_the_experiment_reads_the_winners(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    winner = MlflowClient(uri).create_experiment("hacrl")
    MlflowClient(uri).set_experiment_tag(winner, "who", "the other job")
    loser = LateLookup(uri)
    assert experiment_id_and_tags(loser, "hacrl") == (winner, {"who": "the other job"})
    assert loser.missed


def test_a_new_experiment_is_created_once_with_its_artifacts_beside_the_store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment_id, tags = experiment_id_and_tags(MlflowClient(uri), "new")
    assert tags == {}
    assert experiment_id_and_tags(MlflowClient(uri), "new")[0] == experiment_id
    assert MlflowClient(uri).get_experiment(experiment_id).artifact_location == (tmp_path / "mlruns").as_uri()


def test_the_launcher_creates_each_jobs_experiment_with_its_tags_and_every_agents_view(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def job(experiment: str, agents: list[str], backend: str = "mlflow"):
        members = {a: {} for a in agents}
        return OmegaConf.create(
            {"tracking": {"backend": backend, "uri": uri, "experiment": experiment}, "agents": {"members": members}}
        )

    create_stores([job("a", ["x", "y"]), job("a", ["y", "z"]), job("b", ["x"]), job("off", ["x"], backend="none")])
    client = MlflowClient(uri)
    a, b = client.get_experiment_by_name("a"), client.get_experiment_by_name("b")
    assert a.tags["mlflow.experimentKind"] == EXPERIMENT_KIND and "mlflow.note.content" in a.tags
    assert view_agents(a.tags) == ["x", "y", "z"] and view_agents(b.tags) == ["x"]
    assert VIEW_TAG + FINAL_VIEW in b.tags
    assert client.get_experiment_by_name("off") is None
