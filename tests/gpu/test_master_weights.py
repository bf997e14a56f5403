"""model.mixed_precision=master (the default for dtype=float32, compute_dtype=bfloat16): bf16 weights compute,
float32 masters step, on CPU through the real update path; a checkpoint resumes the masters exactly; sharding takes
them back."""

import torch

from hacrl_exp.agents.precision import MasterWeightsAdamW
from hacrl_exp.config.schema import ModelConfig
from hacrl_exp.trainer.checkpoint import load_agent_state, save_agent_state
from tests.gpu.test_precision_lora import make_agent, snapshot, train

MASTER = ModelConfig(arch="llama", compute_dtype="bfloat16")


def test_bf16_weights_float32_masters_and_gradients():
    fp32 = make_agent(model=ModelConfig(arch="llama"))
    agent = make_agent(model=MASTER, kl_coef=0.1)
    optimizer = agent.optimizer
    assert isinstance(optimizer, MasterWeightsAdamW)
    assert all(p.dtype == torch.bfloat16 for p in agent.model.parameters())
    assert all(p.dtype == torch.bfloat16 for p in agent.reference.parameters())
    assert all(b.dtype == torch.float32 for b in agent.model.buffers() if b.is_floating_point())  # rotary stays fp32
    # the masters are the float32 weights the model was built with, not their bf16 rounding
    for master, weight in zip(optimizer.masters, fp32.model.parameters()):
        assert master.dtype == torch.float32 and torch.equal(master, weight)
    assert agent.model(input_ids=torch.tensor([[4, 5, 6]])).logits.dtype == torch.bfloat16
    before = [m.clone() for m in optimizer.masters]
    metrics = train(agent, kl_coef=0.1)
    assert metrics["train/grad_norm"] > 0 and metrics["train/skipped_updates"] == 0
    assert all(p.grad is None for p in agent.model.parameters())  # no bf16 gradient outlives its backward
    assert all(m.grad is not None and m.grad.dtype == torch.float32 for m in optimizer.masters)
    for master, old, weight in zip(optimizer.masters, before, agent.model.parameters()):
        assert master.dtype == torch.float32 and not torch.equal(master, old)
        assert torch.equal(weight, master.to(torch.bfloat16))  # the weights are the masters, rounded


def test_updates_below_bf16_resolution_accumulate_in_the_masters():
    """lr 1e-6 moves weights of size ~0.02 by ~1e-6, below bf16's spacing there (~1e-4): the bf16 weights mostly
    stay, the float32 masters all move (bf16 weights stepped directly would lose every such update)."""
    agent = make_agent(model=MASTER, lr=1e-6)
    before, weights = [m.clone() for m in agent.optimizer.masters], snapshot(agent.model)
    train(agent)
    moved = [not torch.equal(m, b) for m, b in zip(agent.optimizer.masters, before)]
    assert sum(moved) >= len(moved) - 2  # all but perhaps a norm weight whose gradient is 0
    changed = sum(int((p != weights[n]).sum()) for n, p in agent.model.named_parameters())
    total = sum(p.numel() for p in agent.model.parameters())
    assert changed < 0.05 * total, (changed, total)


def test_master_gradients_equal_the_float32_sum_of_micro_batch_gradients():
    """Two micro-batches' bf16 gradients accumulate into one float32 gradient: their float32 sum."""
    agent = make_agent(model=MASTER)
    ids = torch.tensor([[4, 5, 6, 7, 8]])
    grads = []
    for _ in range(2):
        agent.model(input_ids=ids, labels=ids).loss.backward()
        grads.append([m.grad.clone() for m in agent.optimizer.masters])
    singles = [g.clone() for g in grads[0]]
    for total, first, single in zip(grads[1], grads[0], singles):
        torch.testing.assert_close(total, 2 * single, rtol=0, atol=0)  # same inputs: exactly twice
        assert total.dtype == torch.float32 and first.dtype == torch.float32


def test_checkpoint_resumes_the_float32_masters(tmp_path):
    agent = make_agent(model=MASTER)
    train(agent)
    save_agent_state(agent, tmp_path, {"cpu": torch.get_rng_state()})
    resumed = make_agent(model=MASTER)
    load_agent_state(tmp_path, resumed)
    for a, b in zip(agent.optimizer.masters, resumed.optimizer.masters):
        assert torch.equal(a, b)
    for a, b in zip(agent.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)
    train(agent), train(resumed)
    for a, b in zip(agent.optimizer.masters, resumed.optimizer.masters):
        assert torch.equal(a, b)


def test_sharding_takes_the_masters_back_as_float32_weights():
    from hacrl_exp.agents.sharding import init_rank_group, shard_agent, store_socket
    from hacrl_exp.config.schema import AgentConfig

    agent = make_agent(model=MASTER)
    train(agent)
    masters = [m.clone() for m in agent.optimizer.masters]
    listening = store_socket()
    init_rank_group(0, 1, listening.getsockname()[1], torch.device("cpu"), listening)
    try:
        shard_agent(agent, AgentConfig(model=MASTER, lr=1e-2, weight_decay=0.0))
        weights = [p.full_tensor() for p in agent.model.parameters()]
        assert all(w.dtype == torch.float32 for w in weights)
        assert all(torch.equal(w, m) for w, m in zip(weights, masters))
        assert type(agent.optimizer) is torch.optim.AdamW
        before = snapshot(agent.model)
        assert train(agent)["train/grad_norm"] > 0  # on CPU: float32 shards under bf16 autocast
        assert any(not torch.equal(p.full_tensor(), before[n].full_tensor()) for n, p in agent.model.named_parameters())
    finally:
        torch.distributed.destroy_process_group()
