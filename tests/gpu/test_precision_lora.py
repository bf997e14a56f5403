"""bf16 (autocast and native), gradient checkpointing and LoRA on tiny agents, on CPU, through the real update path."""

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM
from transformers.modeling_layers import GradientCheckpointingLayer

from hacrl_exp.agents.agent import build_agent, save_agent
from hacrl_exp.agents.logprobs import response_logprobs
from hacrl_exp.agents.lora import ADAPTER_DIR, load_adapter, merged_weights
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.config.schema import (
    AgentConfig,
    AgentsConfig,
    AlgorithmConfig,
    Config,
    LoraConfig,
    ModelConfig,
    TrainerConfig,
)
from hacrl_exp.trainer import step
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.step import LearnerBatch

pytest.importorskip("peft", reason="LoRA needs peft (the .[lora] / .[dev] extra)")

TOKENIZER = build_tokenizer("char", "0123456789+=,|")
ROWS = 8


def make_agent(arch="llama", kl_coef=0.0, lr=1e-2, **cfg):
    model = build_tiny_model(arch, TOKENIZER, 32, 2, 4, seed=0)
    config = AgentConfig(lr=lr, weight_decay=0.0, **cfg)
    args = dict(device=torch.device("cpu"), kl_coef=kl_coef, max_prompt_tokens=16, max_batch_size=16)
    return build_agent("a", config, model, TOKENIZER, **args)


def make_batch(agent) -> LearnerBatch:
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, len(TOKENIZER), (6,), generator=g).tolist() for _ in range(ROWS)]
    responses = [torch.randint(3, len(TOKENIZER), (4 + r % 3,), generator=g).tolist() for r in range(ROWS)]
    with torch.no_grad():
        logp, mask = response_logprobs(agent.model, prompts, responses, agent.pad_id)
    # old log-probs a little off the model's, so the ratios differ from 1 and the loss has a gradient
    old = [logp[r, : int(mask[r].sum())].double() - 0.01 * (r % 3) for r in range(ROWS)]
    return LearnerBatch.own_rows(prompts, responses, torch.linspace(-1, 1, ROWS), old)


def train(agent, kl_coef=0.0) -> dict:
    trainer = TrainerConfig(prompts_per_step=2, group_size=4, minibatches_per_block=1, micro_batch_size=4)
    algo = AlgorithmConfig(name="gspo", kl_coef=kl_coef, self_clip_low=0.5, self_clip_high=0.5)
    config = Config(agents=AgentsConfig(members={"a": AgentConfig()}), algorithm=algo, trainer=trainer)
    return step.update(agent, make_batch(agent), learner_params(config)[0], ["a"])


def snapshot(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def logits(model, ids=((4, 5, 6, 7, 8),)) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor(ids)).logits.float()


def test_bf16_autocast_keeps_float32_weights_and_trains():
    model = ModelConfig(arch="llama", compute_dtype="bfloat16", mixed_precision="autocast")
    agent = make_agent(model=model, kl_coef=0.1)
    assert all(p.dtype == torch.float32 for p in agent.model.parameters())  # master weights
    assert agent.reference.forward.__self__ is agent.reference  # the deep-copied reference autocasts itself
    assert agent.reference(input_ids=torch.tensor([[4, 5]])).logits.dtype == torch.bfloat16
    assert agent.model(input_ids=torch.tensor([[4, 5, 6]])).logits.dtype == torch.bfloat16  # bf16 matmuls
    logp, _ = response_logprobs(agent.model, [[4, 5]], [[6, 7]], agent.pad_id)
    assert logp.dtype == torch.float32  # log-softmax in float32
    before = snapshot(agent.model)
    metrics = train(agent)
    assert metrics["train/grad_norm"] > 0 and metrics["train/skipped_updates"] == 0
    assert all(p.dtype == torch.float32 for p in agent.model.parameters())
    assert all(not torch.equal(p, before[n]) for n, p in agent.model.named_parameters())


def test_native_bf16_weights_train():
    agent = make_agent(model=ModelConfig(arch="opt", dtype="bfloat16"))
    assert all(p.dtype == torch.bfloat16 for p in agent.model.parameters())
    before = snapshot(agent.model)
    metrics = train(agent)
    assert metrics["train/grad_norm"] > 0 and metrics["train/skipped_updates"] == 0
    assert sum(not torch.equal(p, before[n]) for n, p in agent.model.named_parameters()) > len(before) // 2


@pytest.mark.parametrize("arch", ["llama", "gpt2"])  # GPT-2 passes its KV cache to layers positionally
def test_gradient_checkpointing_recomputes_only_under_autograd_and_changes_nothing(arch):
    plain = make_agent(arch)
    ckpt = make_agent(arch, model=ModelConfig(arch=arch, gradient_checkpointing=True))
    layers = [m for m in ckpt.model.modules() if isinstance(m, GradientCheckpointingLayer) and m.gradient_checkpointing]
    assert len(layers) == 2
    calls = []
    mlp = layers[0].mlp
    mlp.forward = lambda *args, forward=mlp.forward, **kwargs: calls.append(1) or forward(*args, **kwargs)
    ids = torch.tensor([[4, 5, 6, 7, 8]])
    ckpt.model(input_ids=ids, labels=ids).loss.backward()
    assert len(calls) == 2  # forward, then the recomputation in backward
    calls.clear()
    logits(ckpt.model)
    assert len(calls) == 1  # no gradients: no checkpointing
    plain.model(input_ids=ids, labels=ids).loss.backward()
    for (name, a), b in zip(plain.model.named_parameters(), ckpt.model.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-7, msg=name)
    # generation still runs with its KV cache and gives the same greedy tokens
    greedy = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    torch.testing.assert_close(plain.model.generate(ids, **greedy), ckpt.model.generate(ids, **greedy))
    metrics = train(ckpt)
    assert metrics["train/grad_norm"] > 0


def test_lora_agent_trains_only_adapters_and_saves_merged_weights_plus_adapter(tmp_path: Path):
    agent = make_agent(lora=LoraConfig(r=4, alpha=8.0), kl_coef=0.1)
    initial = logits(agent.model)
    before = snapshot(agent.model)
    metrics = train(agent, kl_coef=0.1)
    assert metrics["train/grad_norm"] > 0
    changed = {n for n, p in agent.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(".lora_" in n for n in changed)  # the base never moves
    assert {n for n in before if ".lora_B." in n} <= changed
    trained = logits(agent.model)
    assert (trained - initial).abs().max() > 1e-4
    torch.testing.assert_close(logits(agent.reference), initial)  # KL reference: the base, adapters off

    save_agent(agent, tmp_path)
    assert (tmp_path / "model.safetensors").is_file() and (tmp_path / ADAPTER_DIR / "adapter_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()  # a plain HF model
    torch.testing.assert_close(logits(merged), trained, rtol=1e-4, atol=1e-5)
    names = set(build_tiny_model("llama", TOKENIZER, 32, 2, 4).state_dict())
    assert set(dict(merged_weights(agent.model))) == names  # Hugging Face names, as vLLM's load_weights wants

    fresh = make_agent(lora=LoraConfig(r=4, alpha=8.0))
    load_adapter(fresh.model, tmp_path)  # resume: rebuilt base + saved adapter = the trained model exactly
    torch.testing.assert_close(logits(fresh.model), trained, rtol=0, atol=0)


def test_lora_on_gpt2_conv1d_and_named_targets():
    agent = make_agent("gpt2", lora=LoraConfig(r=2, target_modules=["c_attn"]))
    trainable = [n for n, p in agent.model.named_parameters() if p.requires_grad]
    assert trainable and all("c_attn.lora_" in n for n in trainable)
    before = logits(agent.model)
    train(agent)
    merged = dict(merged_weights(agent.model))
    base = build_tiny_model("gpt2", TOKENIZER, 32, 2, 4, seed=0)
    base.load_state_dict(merged)
    torch.testing.assert_close(logits(base.eval()), logits(agent.model), rtol=1e-4, atol=1e-5)
    assert (logits(base) - before).abs().max() > 0


def test_lora_agent_checkpoint_resumes_exactly(tmp_path: Path):
    from hacrl_exp.trainer.checkpoint import load_agent_state, save_agent_state

    agent = make_agent(lora=LoraConfig(r=4))
    train(agent)
    save_agent_state(agent, tmp_path, {"torch": torch.get_rng_state()})
    resumed = make_agent(lora=LoraConfig(r=4))
    load_agent_state(tmp_path, resumed)
    for (name, a), b in zip(agent.model.named_parameters(), resumed.model.parameters()):
        assert torch.equal(a, b), name
    saved, loaded = agent.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert saved.keys() == loaded.keys() and all(torch.equal(saved[k]["exp_avg"], loaded[k]["exp_avg"]) for k in saved)
    train(agent), train(resumed)  # the next update is the same too
    for a, b in zip(agent.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)


def test_lora_initialisation_depends_on_the_seed_only():
    first = make_agent(lora=LoraConfig(r=4))
    state = torch.get_rng_state()
    torch.rand(5)  # a different global RNG state must not matter
    second = make_agent(lora=LoraConfig(r=4))
    assert not torch.equal(torch.get_rng_state(), state)  # (the draw above moved it; building did not reset it)
    for (name, a), b in zip(first.model.named_parameters(), second.model.parameters()):
        assert torch.equal(a, b), name
