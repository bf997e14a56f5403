"""Paths resolved once, strictly, and every input checked before the first file is written (issue 30).

Each case runs `python -m hacrl_exp.run`'s `main` on a real command line, with real files, folders, symlinks,
devices and a read-only file system: one line on stderr, exit code 2, and nothing written (no hydra/ folder, no run
folder, no mlflow.db), within seconds. docs/reliability.md ("Paths, resume, signals") lists them.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import stat
from pathlib import Path

import pytest

from hacrl_exp import grade
from hacrl_exp.config.schema import TrackingConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.paths import check_output, output_problem
from hacrl_exp.tracking.store import store_location
from hacrl_exp.tracking.tracker import ui_hint
from tests.e2e.tiny import tiny_overrides
from tests.reliability.filesystems import tmpfs
from tests.reliability.test_errors_first import main_refuses

MATH_ROW = {"problem": "What is $1+1$? " * 20, "answer": "2", "solution": "Add them: $1+1=\\boxed{2}$. " * 10}


def test_a_query_in_the_store_uri_is_refused_and_the_other_store_is_untouched(tmp_path, monkeypatch, capsys):
    """Case 1: `sqlite:////abs/p?x/mlflow.db` is the database /abs/p to MLflow's driver (an existing store there
    received the run before)."""
    with sqlite3.connect(tmp_path / "p") as store:  # an existing sqlite file at <tmp>/p
        store.execute("CREATE TABLE runs (run_uuid TEXT)")
    (tmp_path / "p?x").mkdir()
    store = (tmp_path / "p").read_bytes()
    line = main_refuses(
        tmp_path, monkeypatch, capsys, [*tiny_overrides(), f"tracking.uri=sqlite:///{tmp_path}/p?x/mlflow.db"]
    )
    assert line.startswith(f"ConfigError: tracking.uri=sqlite:///{tmp_path}/p?x/mlflow.db: the URI has a query")
    assert f"MLflow would open {tmp_path}/p" in line
    assert (tmp_path / "p").read_bytes() == store and not any((tmp_path / "p?x").iterdir())


@pytest.mark.parametrize(
    "uri, refused",
    [
        ("sqlite:///{tmp}/a%20b/mlflow.db", "MLflow would open {tmp}/a b/mlflow.db, not {tmp}/a%20b/mlflow.db"),
        ("sqlite:///{tmp}/a#b/mlflow.db", "the URI has a fragment"),
        ("sqlite://host/{tmp}/mlflow.db", "a sqlite store is sqlite:///<path to the .db file>"),
        ("http://127.0.0.1:9/?token=x", "the URI has a query"),
    ],
)
def test_a_store_uri_mlflow_reads_differently_is_refused(tmp_path, uri, refused):
    uri = uri.format(tmp=tmp_path)
    with pytest.raises(ConfigError) as info:
        store_location(TrackingConfig(uri=uri))
    assert str(info.value).startswith(f"tracking.uri={uri}: ") and refused.format(tmp=tmp_path) in str(info.value)


def test_the_mlflow_ui_command_names_the_parsed_store(tmp_path, monkeypatch):
    """A relative sqlite path is made absolute once; the printed command is one shell word per argument, so a folder
    with a space names the same file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my runs").mkdir()
    location = store_location(TrackingConfig(uri="sqlite:///my runs/mlflow.db"))
    assert location.path == tmp_path / "my runs" / "mlflow.db" and location.uri == f"sqlite:///{location.path}"
    words = shlex.split(ui_hint(location.uri, "1").removeprefix("MLflow: ").split(", then")[0])
    assert words[:5] == ["python", "-m", "hacrl_exp.ui", "--store", location.uri]
    assert words[5:9] == ["(or", "mlflow", "ui", "--backend-store-uri"] and words[9] == location.uri


@pytest.mark.parametrize("target", ["device", "fifo", "symlink"])
def test_grade_never_replaces_what_out_names(tmp_path, target, capsys):
    """Case 2: `--out` a device node, a fifo or a symlink: one line, exit 2, the node or link unchanged; a symlink is
    followed (its target replaced, the link kept) with --follow-symlinks."""
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"gold": "2", "response": "\\boxed{2}"}) + "\n")
    out = tmp_path / "out"
    if target == "device":
        try:
            os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # a private /dev/full
        except PermissionError:
            pytest.skip("mknod needs root")
    elif target == "fifo":
        os.mkfifo(out)
    else:
        (tmp_path / "target.jsonl").write_text("old\n")
        out.symlink_to("target.jsonl")
    kind = os.lstat(out).st_mode
    with pytest.raises(SystemExit) as info:
        grade.main(["--in", str(inp), "--out", str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(f"ConfigError: --out={out}")
    assert os.lstat(out).st_mode == kind and sorted(p.name for p in tmp_path.iterdir())[:2] == ["in.jsonl", "out"]
    if target == "symlink":
        assert grade.main(["--in", str(inp), "--out", str(out), "--follow-symlinks"]) == 0
        assert out.is_symlink() and json.loads((tmp_path / "target.jsonl").read_text())["reward"] == 1.0
    assert output_problem(Path("/dev/full"), "file").startswith("/dev/full is a device")  # checked, never written


def test_output_folders_that_cannot_be_written_are_one_line(tmp_path, monkeypatch, capsys):
    """Cases 8b and 8e: a read-only file system, a dangling symlink, a symlink loop, a symlink to a folder (refused
    unless --follow-symlinks) and a device as trainer.output_dir."""
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    expected = {
        "dangling": "dangling is a dangling symlink (to {tmp}/gone, which does not exist)",
        "loop": "loop is a symlink loop",
        "link": "link is a symlink (to {tmp}/real); give the real path, or pass --follow-symlinks",
        "dangling/run": "dangling is a dangling symlink",
        "/dev/null": "/dev/null is a device, not a folder",
    }
    for name, problem in expected.items():
        folder = tmp_path / name
        line = main_refuses(tmp_path, monkeypatch, capsys, [*tiny_overrides(), f"trainer.output_dir={folder}"])
        assert line.startswith(f"ConfigError: trainer.output_dir={folder}") and problem.format(tmp=tmp_path) in line
    assert check_output(tmp_path / "link", "trainer.output_dir", follow=True) == tmp_path / "real"
    with tmpfs(tmp_path / "ro", 1024, read_only=True) as read_only:
        for key in ("trainer.output_dir", "hydra.run.dir"):  # the run folder, and Hydra's
            line = main_refuses(tmp_path, monkeypatch, capsys, [*tiny_overrides(), f"{key}={read_only}/run"])
            assert (
                line
                == f"ConfigError: {key}={read_only}/run: {read_only} cannot be written (permission denied or "
                + ("a read-only file system)")
            )


def test_a_yaml_bomb_and_a_huge_preset_are_refused_in_a_second(tmp_path, monkeypatch, capsys):
    """Case 7a: a --config-dir preset whose 73 aliases expand to 387 million values (it composed for 120 s and took
    over 1 GB before); a recursive alias; a preset over 1 MB."""
    presets = tmp_path / "presets" / "preset"
    presets.mkdir(parents=True)
    lines = ["# @package _global_", 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    (presets / "bomb.yaml").write_text("\n".join([*lines, "extra: {bomb: *l8}"]) + "\n")
    argv = ["--config-dir", str(tmp_path / "presets"), *tiny_overrides(), "+preset=bomb"]
    line = main_refuses(tmp_path, monkeypatch, capsys, argv)
    assert line == f"ConfigError: {presets / 'bomb.yaml'}: its aliases expand to over 100000 values; write the " + (
        "values out, or split the file"
    )
    (presets / "bomb.yaml").write_text("# @package _global_\nextra: &a {again: [*a]}\n")
    assert "a recursive alias" in main_refuses(tmp_path, monkeypatch, capsys, argv)
    (presets / "bomb.yaml").write_text("# @package _global_\nextra:\n" + "  k: 1\n" * 150_000)
    assert "bytes, over the 1048576 (1 MiB) a config file may hold" in main_refuses(tmp_path, monkeypatch, capsys, argv)


def test_arguments_in_an_order_hydra_refuses_are_one_line_before_anything(tmp_path, monkeypatch, capsys):
    """Case 7b: --config-dir between two overrides passed the check before, wrote mlflow.db, then Hydra refused."""
    (tmp_path / "presets").mkdir()
    argv = ["trainer.steps=2", "--config-dir", str(tmp_path / "presets"), "trainer.seed=1"]
    line = main_refuses(tmp_path, monkeypatch, capsys, argv)
    assert line.startswith("ConfigError: the arguments cannot be read: unrecognized arguments: trainer.seed=1 ")
    assert line.endswith("go before or after all key=value overrides, not between them")


def test_tag_keys_and_values_are_checked_like_agent_names(tmp_path, monkeypatch, capsys):
    """Case 7c: a tag key `a/../b` from a preset was an MLflow traceback after 9 s, the parent run left RUNNING."""
    presets = tmp_path / "presets" / "preset"
    presets.mkdir(parents=True)
    (presets / "tags.yaml").write_text('# @package _global_\ntracking:\n  tags: {"a/../b": x}\n')
    argv = ["--config-dir", str(tmp_path / "presets"), *tiny_overrides(), "+preset=tags"]
    line = main_refuses(tmp_path, monkeypatch, capsys, argv)
    assert line.startswith("ConfigError: tracking.tags.a/../b: a tag key may hold only letters, digits")
    for tags, key in [("{mlflow.user: x}", "mlflow.user"), ('{ok: "a\\nb"}', "ok")]:
        (presets / "tags.yaml").write_text(f"# @package _global_\ntracking:\n  tags: {tags}\n")
        assert main_refuses(tmp_path, monkeypatch, capsys, argv).startswith(f"ConfigError: tracking.tags.{key}: a tag")


def test_a_huge_group_is_refused(tmp_path, monkeypatch, capsys):
    """Case 8a: group_size=100000 with 4 prompts passed the memory estimate and ran silent for 150 s."""
    line = main_refuses(tmp_path, monkeypatch, capsys, [*tiny_overrides(), "trainer.group_size=100000"])
    assert line == "ConfigError: trainer.group_size=100000 is out of range; allowed [2, 4096]"


def math_data(folder: Path, train_rows: list[str]) -> Path:
    folder.mkdir()
    (folder / "math_train.jsonl").write_text("".join(row + "\n" for row in train_rows))
    (folder / "math500.jsonl").write_text((json.dumps(MATH_ROW) + "\n") * 4)
    return folder


def test_data_rows_and_tokenizers_are_checked_before_anything_is_written(tmp_path, monkeypatch, capsys):
    """Cases 9a, 9b: a bad row named file:line after 9 s, once hydra/, mlflow.db and the run's .lock existed; the tiny
    pair on MATH crashed in the warm start (IndexError: its texts outrun 128 learned positions), and without the warm
    start its BPE vocabulary (96) fell short of the task's 98 tokens late."""
    data = math_data(tmp_path / "data", [json.dumps(MATH_ROW), json.dumps(MATH_ROW), '{"problem": "x"}'])
    math = [*tiny_overrides(), "task=math", f"task.data_dir={data}"]
    line = main_refuses(tmp_path, monkeypatch, capsys, math)
    assert line.startswith(f"DataError: {data / 'math_train.jsonl'}:3: ") and "answer" in line
    (data / "math_train.jsonl").write_text((json.dumps(MATH_ROW) + "\n") * 8)
    line = main_refuses(tmp_path, monkeypatch, capsys, math)
    assert line.startswith("ConfigError: agents.members.opt_char.model.max_positions=128: task=math's warm-start texts")
    cold = [*math, *(f"agents.members.{a}.warm_start.steps=0" for a in ("opt_char", "gpt2_bpe"))]
    line = main_refuses(tmp_path, monkeypatch, capsys, cold)
    assert line.startswith("ConfigError: agents.members.gpt2_bpe.tokenizer.vocab_size=96 is below the 98 tokens")


def test_atomic_writes_replace_only_regular_files(tmp_path):
    """The one atomic write (checkpoints' `latest`, config.json, summary.json, metrics.jsonl, grade --out, a sweep's
    best_alpha preset): a symlink, fifo or folder in its place is refused and left as it was; a file is replaced."""
    from hacrl_exp.errors import OutputError
    from hacrl_exp.trainer.checkpoint import write_text_atomic

    (tmp_path / "target").write_text("kept")
    (tmp_path / "link").symlink_to("target")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for name, kind in [("link", "a symlink"), ("fifo", "a fifo"), ("folder", "a folder")]:
        with pytest.raises(OutputError, match=f"^{tmp_path / name} is {kind}; only a regular file is replaced$"):
            write_text_atomic(tmp_path / name, "new")
    assert (tmp_path / "target").read_text() == "kept" and (tmp_path / "link").is_symlink()
    write_text_atomic(tmp_path / "target", "new")
    assert (tmp_path / "target").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "folder", "link", "target"]  # no temporary left
