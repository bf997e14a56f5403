"""The command line as users type it: the design card's multirun, and the theory check."""

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.tiny import tiny_overrides


def test_design_card_multirun(tmp_path):
    overrides = [o for o in tiny_overrides("three_way", steps=2) if not o.startswith("agents=")]
    command = [
        sys.executable,
        "-m",
        "hacrl_exp.run",
        "-m",
        "agents=three_way",
        "mechanisms.omega=false",
        *overrides,
        f"hydra.sweep.dir={tmp_path}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    summaries = sorted(Path(tmp_path).glob("*/summary.json"))
    assert len(summaries) == 1
    summary = json.loads(summaries[0].read_text())
    assert summary["last_step"] == 2 and set(summary["counters"]) == {"opt_char", "gpt2_bpe", "llama_char"}
    config = json.loads((summaries[0].parent / "config.json").read_text())
    assert config["mechanisms"]["omega"] is False
    assert "held-out accuracy" in result.stdout
