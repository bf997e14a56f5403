"""Run-size presets written once for the tests and the benchmarks: Hydra overrides, pure data.

`tiny_overrides` shrinks the embedded experiment to seconds (the tiny agents of tests/e2e and of the benchmarks'
memory-growth and long runs). A preset is a list of overrides rather than a `conf/experiment/` file because its
member keys depend on the agents preset it shrinks (`agents.members.<name>.model...`).
"""

from __future__ import annotations

AGENT_MEMBERS = {
    "pair": ["opt_char", "gpt2_bpe"],
    "three_way": ["opt_char", "gpt2_bpe", "llama_char"],
    "solo": ["opt_char"],
    "star": ["opt_char", "gpt2_bpe", "llama_char"],
    "ring": ["opt_char", "gpt2_bpe", "llama_char"],
}
"""Member names of each conf/agents preset that the tiny presets shrink."""


def tiny_overrides(agents: str = "pair", steps: int = 3) -> list[str]:
    """Hydra overrides for a seconds-long run with the given agents preset: hidden 32, 2 layers, add2 chains,
    4 prompts × G 4, ≤ 24 new tokens, 1 thread (warm start ~3 s per agent, cached)."""
    out = [
        f"agents={agents}",
        "task.tiers=[add2]",
        "task.eval_per_tier=8",
        f"trainer.steps={steps}",
        "trainer.prompts_per_step=4",
        "trainer.group_size=4",
        "trainer.eval_limit=8",
        "trainer.progress=false",
        "rollout.max_new_tokens=24",
        "trainer.threads=1",
    ]
    for name in AGENT_MEMBERS[agents]:
        member = f"agents.members.{name}"
        out += [
            f"{member}.model.hidden_size=32",
            f"{member}.model.num_layers=2",
            f"{member}.warm_start.steps=150",
            f"{member}.warm_start.batch_size=32",
            f"{member}.warm_start.lr=1e-2",
            f"{member}.lr=1e-3",
        ]
    return out
