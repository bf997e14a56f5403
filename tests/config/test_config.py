"""Every preset composes and validates; bad input is one line naming the key, exit code 2, no traceback."""

import importlib.util
import itertools
import subprocess
import sys

import pytest

from hacrl_exp.config.preflight import CONFIG_DIR, group_options
from hacrl_exp.errors import ConfigError
from hacrl_exp.trainer.validate import preflight

GROUPS = ["agents", "algorithm", "mechanisms", "task", "rollout", "trainer", "tracking"]


def test_every_group_option_composes():
    for group in GROUPS:
        for option in group_options(group):
            overrides = [f"{group}={option}"]
            if (group, option) == ("agents", "solo"):
                overrides.append("algorithm=gspo")  # hacpo, the default, needs two agents
            if (group, option) == ("rollout", "vllm") and importlib.util.find_spec("vllm") is None:
                with pytest.raises(ConfigError, match=r'pip install -e "\.\[gpu\]"'):
                    preflight(overrides)  # it composes; only the missing optional extra is refused
                continue
            config = preflight(overrides)
            assert config is not None, overrides


@pytest.mark.parametrize(
    "agents, algorithm",
    list(itertools.product(["pair", "three_way", "star", "ring"], ["hacpo", "naive", "gspo", "gspo_x2"])),
)
def test_agent_presets_with_algorithms(agents, algorithm):
    config = preflight([f"agents={agents}", f"algorithm={algorithm}"])
    assert len(config.agents.members) == (2 if agents == "pair" else 3)


def test_design_card_override_composes():
    config = preflight(["agents=three_way", "mechanisms.omega=false"])
    assert config.mechanisms.omega is False and list(config.agents.members) == ["opt_char", "gpt2_bpe", "llama_char"]


@pytest.mark.parametrize(
    "override, needle",
    [
        (["agents=nosuch"], "agents=nosuch is not a known agents preset"),
        (["task=nosuch"], "task=nosuch"),
        (["algorithm=hacpoo"], "Did you mean algorithm=hacpo"),
        (["trainer.stepz=3"], "Did you mean trainer.steps"),
        (["algorithm.alpha=-1"], "algorithm.alpha=-1.0 is out of range"),
        (["algorithm.delta=1.0"], "algorithm.delta=1.0 is out of range; allowed [0, 1)"),
        (["algorithm.delta=-0.1"], "algorithm.delta"),
        (["trainer.group_size=1"], "trainer.group_size=1 is out of range"),
        (["agents=solo", "algorithm=hacpo"], "needs at least 2 agents"),
        (["mechanisms.omega=maybe"], "mechanisms.omega"),
        (
            ["agents.members.opt_char.model.source=pretrained", "agents.members.opt_char.model.path=/nonexistent/m"],
            "model.path='/nonexistent/m' does not exist",
        ),
        (["agents.members.opt_char.alpha_from.nobody=2.0"], "alpha_from.nobody"),
        (["agents.members.opt_char.model.hidden_size=90"], "not divisible by num_heads"),
        (["trainer.minibatches_per_block=3"], "minibatches_per_block=3 does not divide"),
        (["task.tiers=[add3,div9]"], "task.tiers='div9'"),
    ],
)
def test_bad_input_names_the_key(override, needle):
    with pytest.raises(ConfigError) as info:
        preflight(override)
    assert needle in str(info.value)


def test_bad_input_exits_2_with_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "hacrl_exp.run", "algorithm.alpha=-1", f"hydra.run.dir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["ConfigError: algorithm.alpha=-1.0 is out of range; allowed [0, 100]"]
    assert "Traceback" not in result.stdout + result.stderr
    assert not any(tmp_path.iterdir())  # nothing written


def test_config_dir_is_the_repo_conf():
    assert (CONFIG_DIR / "config.yaml").is_file()


def test_hydra_flags_are_not_overrides():
    from hacrl_exp.config.cli import overrides_of

    argv = ["-m", "--cfg", "job", "--config-name", "config", "agents=pair", "trainer.steps=3"]
    assert overrides_of(argv) == ["agents=pair", "trainer.steps=3"]
    with pytest.raises(ConfigError, match="unrecognized arguments: trainer.steps=3; Hydra's flags"):
        overrides_of(["agents=pair", "--config-name", "config", "trainer.steps=3"])  # Hydra refuses this order too


@pytest.mark.parametrize("study", ["alpha_pair", "alpha_pair_quick"])
def test_the_sweep_group_reads_the_study_in_sweeps_and_the_old_name_is_refused(study):
    """+hparams_search=<name> composes the study, read from the top-level sweeps/ through Hydra's search path
    (hydra_plugins/hacrl_sweeps): one file per study, none under conf/. The group's old name, +sweep=<name>, is one
    line naming hparams_search."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from hacrl_exp.config.preflight import SWEEPS_GROUP, compose_config
    from hydra_plugins.hacrl_sweeps.sweeps_source import GROUP

    assert GROUP == SWEEPS_GROUP == "hparams_search"
    assert (CONFIG_DIR.parent / "sweeps" / f"{study}.yaml").is_file()
    assert not (CONFIG_DIR / "hparams_search").exists() and not (CONFIG_DIR / "sweep").exists()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        composed = compose("config", [f"+hparams_search={study}"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    assert composed.hydra.sweeper.study_name == study and composed.hydra.mode == RunMode.MULTIRUN
    with pytest.raises(ConfigError) as err:
        compose_config([f"+sweep={study}"])
    assert str(err.value) == (
        f"sweep={study}: the group sweep is now hparams_search; use +hparams_search={study} (sweeps/{study}.yaml)"
    )
