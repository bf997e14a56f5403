"""The whole trainer with the GPU options on CPU: a LoRA agent with KL, a bf16-autocast agent with gradient
checkpointing, checkpoints and an exact resume."""

import pytest
from safetensors.torch import load_file

from hacrl_exp.agents.lora import ADAPTER_DIR
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides

pytest.importorskip("peft", reason="LoRA needs peft (the .[lora] / .[dev] extra)")

GPU_OPTIONS = [
    "tracking.backend=none",
    "algorithm.kl_coef=0.01",
    "agents.members.opt_char.lora.r=4",
    "agents.members.opt_char.lora.alpha=8",
    "agents.members.gpt2_bpe.model.compute_dtype=bfloat16",
    "agents.members.gpt2_bpe.model.gradient_checkpointing=true",
    "trainer.checkpoint_every=1",
]


def run(folder, *extra):
    summary = train(preflight(tiny_overrides("pair", steps=2) + GPU_OPTIONS + list(extra)), folder)
    return summary, read_metrics(f"{summary['output_dir']}/metrics.jsonl")


def test_lora_and_bf16_agents_train_checkpoint_and_resume_exactly(tmp_path):
    _, full = run(tmp_path / "full")
    run(tmp_path / "cut", "trainer.stop_after=1")
    summary, resumed = run(tmp_path / "ignored", f"trainer.resume={tmp_path / 'cut'}")
    assert summary["steps_run"] == 1

    def losses(rows):
        keys = ("train/loss", "train/kl", "train/grad_norm")
        return {(r["step"], r["agent"], k): r[k] for r in rows if "train/loss" in r for k in keys}

    assert len(losses(full)) == 2 * 2 * 3 and all(v == v for v in losses(full).values())  # finite, KL logged
    assert losses(resumed) == pytest.approx(losses(full), rel=1e-6, abs=1e-9)
    lora = tmp_path / "full" / "checkpoints" / "step_000002" / "agents" / "opt_char"
    merged = load_file(lora / "model.safetensors")
    assert not any("lora" in k for k in merged)  # a plain model for evaluate / vLLM / any HF tool
    assert (lora / ADAPTER_DIR / "adapter_model.safetensors").is_file()
