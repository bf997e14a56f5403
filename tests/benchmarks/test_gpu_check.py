"""scripts/gpu_check.sh end to end at tiny sizes on CPU, with only what the GPU machine has (no Hydra, MLflow...)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# packages the lent GPU machine does not have: importing any of them would fail there
ABSENT = ("hydra", "omegaconf", "mlflow", "math_verify", "ray", "optuna", "lm_eval", "trl", "datasets", "vllm")


def test_gpu_check_smoke_runs_with_torch_and_transformers_only(tmp_path):
    out = tmp_path / "gpu_check.json"
    code = (
        f"import sys\nfor m in {ABSENT!r}:\n    sys.modules[m] = None  # `import m` now fails\n"
        f"from benchmarks.gpu_check import main\nmain(['--smoke', '--out', {str(out)!r}])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 8  # one table: header + HF generate ×2, GSPO, HACPO, HACPO LoRA, vLLM, FSDP2 ×2
    assert "vllm not installed" in result.stdout
    results = json.loads(out.read_text())
    for key in ("gspo", "hacpo", "hacpo_lora", "fsdp_offload_off", "fsdp_offload_on"):
        assert results[key]["seconds"] > 0 and results[key]["flops"] > 0
        assert results[key]["resident_gib_per_agent"] > 0
    assert results["fsdp_offload_on"]["planned_gib"] < results["fsdp_offload_off"]["planned_gib"]
    # a HACPO learner also trains on its partner's rows (those with a non-zero advantage), with the same scoring
    assert results["hacpo"]["flops"] > 1.3 * results["gspo"]["flops"]
    assert results["hf_generate_mixed"]["tokens"] > 0 and results["hf_generate_mixed"]["tokens_per_s"] > 0
