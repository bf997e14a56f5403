"""Secure defaults: no shell strings, no remote code unless asked, safetensors and weights_only loading, servers on
127.0.0.1, and secrets never logged. Static checks walk the syntax tree of every module we ship; behavioural checks
load hostile files and run a tracked job."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import pytest
import torch

from hacrl_exp.agents.agent import load_pretrained
from hacrl_exp.config.preflight import compose_config
from hacrl_exp.config.schema import AgentConfig, ExecutorConfig, ModelConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.trainer.validate import preflight

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    p for folder in ("hacrl_exp", "hydra_plugins", "benchmarks", "sweeps") for p in (ROOT / folder).rglob("*.py")
)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def calls(path: Path):
    """(dotted name of the callee, call node) of every call in a module."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            yield ast.unparse(node.func), node


def keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def is_true(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True


def test_sources_were_found():
    assert len(SOURCES) > 50 and any(p.name == "loop.py" for p in SOURCES)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_shell_strings_pickles_or_unsafe_loads(path):
    problems = []
    for name, node in calls(path):
        where = f"{path.relative_to(ROOT)}:{node.lineno} {name}"
        if is_true(keyword(node, "shell")) or name in ("os.system", "os.popen", "eval", "exec"):
            problems.append(f"{where}: runs a shell string or evaluates code")
        if name.startswith("subprocess.") and node.args:
            first = node.args[0]
            if isinstance(first, (ast.JoinedStr, ast.BinOp)) or (
                isinstance(first, ast.Constant) and isinstance(first.value, str)
            ):
                problems.append(f"{where}: a command line built as a string (pass an argument list)")
        if name == "torch.load" and not is_true(keyword(node, "weights_only")):
            problems.append(f"{where}: torch.load without weights_only=True")
        if name.split(".")[0] in ("pickle", "dill", "joblib", "cloudpickle") and name.endswith(("load", "loads")):
            problems.append(f"{where}: unpickles data")
        if name in ("yaml.load", "yaml.unsafe_load") and "SafeLoader" not in ast.unparse(node):
            problems.append(f"{where}: yaml.load without SafeLoader")
        if name.endswith(".from_pretrained"):
            remote = keyword(node, "trust_remote_code")
            if is_true(remote):
                problems.append(f"{where}: trust_remote_code=True")
            if (
                remote is not None
                and not isinstance(remote, ast.Constant)
                and "trust_remote_code" not in ast.unparse(remote)
            ):
                problems.append(f"{where}: trust_remote_code from something other than the config switch")
            model = re.search(r"Model(For\w+)?\.from_pretrained$", name) and not name.startswith("Peft")
            if model and not is_true(keyword(node, "use_safetensors")):
                problems.append(f"{where}: a model loaded without use_safetensors=True")
    assert not problems, "\n".join(problems)


def test_remote_code_is_off_by_default_everywhere():
    assert ModelConfig().trust_remote_code is False
    for preset in sorted(p.stem for p in (ROOT / "conf" / "agents").glob("*.yaml")):
        members = compose_config([f"agents={preset}"]).agents.members
        assert members and not any(m.model.trust_remote_code for m in members.values()), preset


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """A tiny save_pretrained model + tokenizer that also ships code which would leave a marker file if run."""
    from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
    from hacrl_exp.tasks.arithmetic import ArithmeticTask

    folder = tmp_path_factory.mktemp("hostile_model")
    task = ArithmeticTask(tiers=["add2"])
    tokenizer = build_tokenizer("char", task.alphabet, task.sample_texts(50))
    build_tiny_model("opt", tokenizer, 16, 1, 2).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    marker = folder / "CODE_RAN"
    (folder / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom transformers import OPTConfig as C, OPTForCausalLM as M\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "evil.C", "AutoModelForCausalLM": "evil.M"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


class Payload:
    """A pickle that creates a file when unpickled (stands in for any code a hostile .pt/.bin file would run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def pretrained(folder: Path) -> AgentConfig:
    return AgentConfig(model=ModelConfig(source="pretrained", path=str(folder)))


def test_shipped_code_never_runs(model_folder):
    model, _ = load_pretrained("hub_model", pretrained(model_folder))  # a known architecture: loaded natively
    assert type(model).__name__ == "OPTForCausalLM" and not (model_folder / "CODE_RAN").exists()
    custom = model_folder.parent / "custom_arch"
    subprocess.run(["cp", "-r", str(model_folder), str(custom)], check=True)
    config = json.loads((custom / "config.json").read_text())
    (custom / "config.json").write_text(json.dumps({**config, "model_type": "evil_model"}))
    with pytest.raises(ConfigError, match=r"hub_model\.model\.trust_remote_code=true only if you trust"):
        load_pretrained("hub_model", pretrained(custom))  # only its code could build it: one-line refusal
    assert not (custom / "CODE_RAN").exists()


def test_pickled_weights_are_refused(model_folder, tmp_path):
    folder = tmp_path / "bin_only"
    subprocess.run(["cp", "-r", str(model_folder), str(folder)], check=True)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "UNPICKLED"
    torch.save({"model.decoder.embed_tokens.weight": Payload(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(ConfigError, match="could not be loaded"):
        load_pretrained("hub_model", pretrained(folder))
    assert not marker.exists()


def test_checkpoint_state_is_loaded_weights_only(tmp_path):
    from hacrl_exp.trainer.checkpoint import load_checkpoint

    marker = tmp_path / "UNPICKLED"
    (tmp_path / "state.json").write_text(json.dumps({"step": 1}))
    torch.save({"torch": Payload(marker)}, tmp_path / "rng.pt")
    with pytest.raises(Exception, match="[Ww]eights only load failed"):
        load_checkpoint(tmp_path)
    assert not marker.exists()


def test_servers_bind_loopback_by_default():
    assert ExecutorConfig().include_dashboard is False and ExecutorConfig().address is None
    tree = ast.parse((ROOT / "hacrl_exp" / "ray_cluster.py").read_text())
    private = [n for n in ast.walk(tree) if isinstance(n, ast.With) and "_loopback_only" in ast.unparse(n.items[0])]
    assert private and any("ray.init" in ast.unparse(n) and "address='local'" in ast.unparse(n) for n in private)
    # a behavioural check of the listening sockets of a private Ray: tests/trainer/test_ray.py
    commands = [  # each server command the docs show, with its arguments (a bare `mlflow ui` in prose has none)
        (doc.name, m.group(0))
        for doc in DOCS
        for m in re.finditer(r"(?:mlflow (?:ui|server)|optuna-dashboard|ray dashboard)(?: +[^\s`]+)+", doc.read_text())
    ]
    assert any("mlflow ui" in command for _, command in commands)
    for doc, command in commands:
        assert re.search(r"--host[ =]127\.0\.0\.1", command), f"{doc}: {command} (add --host 127.0.0.1)"


def test_secrets_are_never_logged(tmp_path, monkeypatch):
    import mlflow

    from hacrl_exp.trainer.loop import train
    from tests.e2e.tiny import tiny_overrides

    secret = "s3cr3t-V4lue"
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", secret)  # MLflow reads its own credentials from the environment
    extra = [f"+extra.api_token={secret}", f"+extra.notes.hf_password={secret}", "trainer.save_final_models=false"]
    config = preflight([*tiny_overrides("solo", 1), "algorithm=gspo", *extra, f"tracking.uri={store}"])
    summary = train(config, tmp_path / "run")
    client = mlflow.MlflowClient(store)
    for run_id in summary["run_ids"].values():
        run = client.get_run(run_id)
        assert secret not in json.dumps([run.data.params, run.data.tags]) and "extra.api_token" not in run.data.params
        for artifact in Path(client.download_artifacts(run_id, "", str(tmp_path / run_id))).rglob("*"):
            assert artifact.is_dir() or secret.encode() not in artifact.read_bytes(), artifact
    for path in (tmp_path / "run").rglob("*"):  # config.json, metrics, checkpoints: nothing on disk either
        assert path.is_dir() or secret.encode() not in path.read_bytes(), path
    assert json.loads((tmp_path / "run" / "config.json").read_text())["extra"]["api_token"] == "***"


def test_a_password_in_a_uri_is_masked():
    from hacrl_exp.tracking import redact_secrets

    params = {"tracking": {"uri": "https://bob:hunter2@mlflow.example/"}, "extra": {"db": "postgresql://u:pw@h/db"}}
    assert "hunter2" not in json.dumps(redact_secrets(params)) and "pw@" not in json.dumps(redact_secrets(params))
    assert redact_secrets({"a": {"api_key": "k", "n": 3}}) == {"a": {"api_key": "***", "n": 3}}


def test_the_printed_mlflow_link_carries_no_credentials():
    from hacrl_exp.tracking import ui_hint

    link = ui_hint("https://alice:s3cr3t-V4lue@mlflow.example.com:5000/", "7")
    page = "#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=hacrl-final-accuracy"
    assert link == f"MLflow: https://mlflow.example.com:5000/{page}"
    local = ui_hint("sqlite:////tmp/x/mlflow.db", "1")
    assert "--host 127.0.0.1" in local and local.endswith(f"http://127.0.0.1:5000/{page.replace('/7/', '/1/')}")
