"""benchmarks/gpu_check.sh's code end to end at tiny sizes on CPU: every row with only what the GPU machine has (no
Hydra, MLflow, TRL...), the TRL row with TRL, and a row past its budget killed with the rows before it kept."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gpu_check import ROWS

ROOT = Path(__file__).resolve().parents[2]
# packages the lent GPU machine does not have (trl and datasets travel as wheels): importing any of them fails there
ABSENT = ("hydra", "omegaconf", "mlflow", "math_verify", "ray", "optuna", "lm_eval", "trl", "datasets", "vllm")


def run_check(tmp_path: Path, *args: str, absent: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, list]:
    """benchmarks.gpu_check in a subprocess whose imports of `absent` packages fail (stubs first on the path, so
    its child processes see them too); its rows from gpu_check.jsonl."""
    stubs = tmp_path / "absent"
    for name in absent:
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text(f"raise ImportError('{name} is absent on the GPU machine')\n")
    path = os.pathsep.join([str(stubs), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "benchmarks.gpu_check", "--smoke", "--out", str(tmp_path), *args]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    lines = (tmp_path / "gpu_check.jsonl").read_text().splitlines()
    return result, [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def inline_check(tmp_path_factory) -> tuple[subprocess.CompletedProcess, list]:
    """Every row of gpu_check.sh plus the shared placement's, in one process with only the GPU machine's packages."""
    return run_check(tmp_path_factory.mktemp("gpu_check"), "--inline", "--rows", ",".join([*ROWS, "share"]),
                     absent=ABSENT)  # fmt: skip


def test_every_row_runs_with_torch_and_transformers_only(inline_check):
    result, rows = inline_check
    assert result.returncode == 0, result.stderr[-3000:]
    by_name = {r["row"]: r for r in rows}
    assert {"gen_dynamic", "gen_static", "gspo", "gspo_profile", "hacpo", "fsdp_offload_off", "fsdp_offload_on"} <= set(
        by_name
    )
    assert by_name["gen_dynamic"]["weights"] == "torch.bfloat16"  # master weights: the model itself is bf16
    for key in ("gspo", "hacpo", "fsdp_offload_off", "fsdp_offload_on"):
        assert by_name[key]["status"] == "ok" and by_name[key]["seconds"] > 0 and by_name[key]["flops"] > 0
        assert by_name[key]["resident_gib_per_agent"] > 0 and by_name[key]["planned_gib"] > 0
    assert by_name["fsdp_offload_on"]["planned_gib"] < by_name["fsdp_offload_off"]["planned_gib"]
    assert by_name["hacpo"]["flops"] > 1.3 * by_name["gspo"]["flops"]  # HACPO also trains on its partner's rows
    assert by_name["gspo_profile"]["top"] and all(0 <= k["share"] <= 1 for k in by_name["gspo_profile"]["top"])
    assert by_name["trl"]["status"].startswith("skipped: ") and "is absent" in by_name["trl"]["status"]
    assert "| gspo |" in result.stdout and "| trl | skipped" in result.stdout  # the summary, read back from the file


def test_trl_row_gives_ours_over_trl_in_one_run(tmp_path):
    result, rows = run_check(tmp_path, "--inline", "--rows", "trl")
    assert result.returncode == 0, result.stderr[-3000:]
    trl = next(r for r in rows if r["row"] == "trl")
    assert trl["status"] == "ok" and trl["ours_s"] > 0 and trl["trl_s"] > 0
    assert abs(trl["ours_over_trl"] - trl["ours_s"] / trl["trl_s"]) < 1e-12


def test_a_row_past_its_budget_is_killed_and_every_row_before_it_is_kept(tmp_path):
    result, rows = run_check(tmp_path, "--rows", "gen,gspo", "--budget", "gspo=0.5")
    assert result.returncode == 1
    names = [r["row"] for r in rows]
    assert names[:3] == ["env", "gen_dynamic", "gen_static"] and "gen_done" in names
    assert rows[-1]["row"] == "gspo" and rows[-1]["status"] == "timeout"
    assert "| gspo | timeout |" in result.stdout


def test_share_row_turns_two_agents_on_one_device_beside_the_planner(inline_check):
    """The shared placement's row: a turn per agent (sleep, wake) with only the GPU machine's packages; on CPU nothing
    moves (0 bytes), the planner's sleeping bytes (1 GiB: context and NCCL buffers) and state share stand beside."""
    result, rows = inline_check
    assert result.returncode == 0, result.stderr[-3000:]
    share = [r for r in rows if r["row"] == "share"]
    assert [r["agent"] for r in share] == ["agent0", "agent1"]
    for row in share:
        assert row["status"] == "ok" and row["moved_gib"] == row["left_gib"] == 0.0  # CPU: the calls, no moves
        assert row["planned_asleep_gib"] == 1.0 and row["planned_moved_gib"] > 0
        assert row["wake_s"] >= 0 and row["sleep_s"] >= 0
