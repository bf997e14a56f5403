"""Overrides that shrink the embedded experiment to seconds: small agents, add2 chains, 4 prompts × G 4."""

AGENTS = {
    "pair": ["opt_char", "gpt2_bpe"],
    "three_way": ["opt_char", "gpt2_bpe", "llama_char"],
    "solo": ["opt_char"],
    "star": ["opt_char", "gpt2_bpe", "llama_char"],
    "ring": ["opt_char", "gpt2_bpe", "llama_char"],
}


def tiny_overrides(agents: str = "pair", steps: int = 3) -> list[str]:
    """Hydra overrides for a seconds-long run with the given agents preset (warm start ~3 s per agent, cached)."""
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
    for name in AGENTS[agents]:
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
