"""Sweeper settings and the job-side pruning hook, in process: real Optuna sqlite storage, no training."""

import pytest

optuna = pytest.importorskip("optuna")

from omegaconf import OmegaConf  # noqa: E402

from hacrl_exp.config.schema import Config  # noqa: E402
from hacrl_exp.errors import ConfigError  # noqa: E402
from hacrl_exp.graph import Edge  # noqa: E402
from hacrl_exp.sweep.settings import parse_settings  # noqa: E402
from hacrl_exp.sweep.studies import EdgeStudies  # noqa: E402
from hacrl_exp.sweep.trial import join_trial  # noqa: E402
from hydra_plugins.hacrl_optuna_sweeper.sweeper import HacrlOptunaSweeperConf  # noqa: E402
from tests.cli import run_cli  # noqa: E402


def raw_settings(**changes) -> dict:
    raw = OmegaConf.to_container(OmegaConf.structured(HacrlOptunaSweeperConf))
    for key, value in changes.items():
        node, *path = key.split("__")
        if path:
            raw[node][path[0]] = value
        else:
            raw[node] = value
    return raw


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"sampler__name": "cmaes"}, "hydra.sweeper.sampler.name"),
        ({"pruner__name": "hyperband"}, "hydra.sweeper.pruner.name"),
        ({"pruner__name": "threshold"}, "hydra.sweeper.pruner (threshold)"),  # needs lower or upper
        ({"n_trials": 0}, "hydra.sweeper.n_trials"),
        ({"alpha__low": 3.0, "alpha__high": 1.0}, "hydra.sweeper.alpha.low"),
        ({"alpha__low": 0.0, "alpha__log": True}, "hydra.sweeper.alpha.low"),
        ({"alpha__choices": [1.0, 1.0]}, "hydra.sweeper.alpha.choices"),
        ({"study_name": "a/b"}, "hydra.sweeper.study_name"),
        ({"direction": "up"}, "hydra.sweeper.direction"),
    ],
)
def test_bad_settings_name_their_key(tmp_path, changes, key):
    with pytest.raises(ConfigError) as error:
        parse_settings(raw_settings(**changes), tmp_path)
    assert str(error.value).startswith(key)


def test_bad_sampler_on_the_command_line_is_one_line_exit_2(tmp_path):
    command = ["+hparams_search=alpha_pair", "hydra.sweeper.sampler.name=cmaes", f"hydra.sweep.dir={tmp_path}"]
    result = run_cli("hacrl_exp.run", command)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("ConfigError: hydra.sweeper.sampler.name='cmaes'") and "Traceback" not in result.stderr


def test_edge_studies_draw_distinct_alpha_and_the_run_stops_only_when_every_edge_prunes(tmp_path):
    settings = parse_settings(raw_settings(pruner__name="threshold", pruner__lower=0.5), tmp_path)
    studies = EdgeStudies(settings, [Edge("a", "b", 1.0), Edge("b", "a", 1.0)])
    asked = studies.ask()
    assert len(set(asked.alphas.values())) == 2  # each edge study has its own seed
    config = Config()
    config.trial.storage = settings.storage
    config.trial.studies = [t.study.study_name for t in asked.trials.values()]
    config.trial.numbers = [t.number for t in asked.trials.values()]
    hook = join_trial(config)
    tags = config.tracking.tags
    assert tags["study"] == "alpha" and tags["trial"] == "0"
    assert float(tags["alpha/a_from_b"]) == pytest.approx(asked.alphas[Edge("a", "b", 1.0)], rel=1e-5)
    assert hook(1, {"a": {"accuracy/mean": 0.9}, "b": {"accuracy/mean": 0.1}}) is False  # only b<-a would prune
    assert hook(2, {"a": {"accuracy/mean": 0.2}, "b": {"accuracy/mean": 0.1}}) is True
    a, b = (t.study.trials[0].intermediate_values for t in asked.trials.values())
    assert a == {1: 0.9, 2: 0.2} and b == {1: 0.1, 2: 0.1}
    assert join_trial(Config()) is None  # outside a sweep
