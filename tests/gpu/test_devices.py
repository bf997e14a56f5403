"""Device placement (a device per agent, spread over the visible GPUs) and per-agent memory reporting."""

import pytest
import torch

from hacrl_exp.agents.agent import build_agent
from hacrl_exp.agents.devices import agent_devices, memory_metrics, place_agents
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.config.schema import AgentConfig, AgentsConfig, Config, TrainerConfig
from hacrl_exp.errors import ConfigError

NAMES = ["a", "b", "c"]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; none is visible")


@pytest.mark.parametrize(
    "requested,n_gpus,expected",
    [
        (["auto"] * 3, 2, ["cuda:0", "cuda:1", "cuda:0"]),  # round-robin while GPUs last
        (["auto"] * 3, 4, ["cuda:0", "cuda:1", "cuda:2"]),  # a GPU each
        (["auto"] * 3, 0, ["cpu", "cpu", "cpu"]),  # no GPU: CPU
        (["auto", "cuda:0", "auto"], 2, ["cuda:1", "cuda:0", "cuda:0"]),  # explicit placements counted first
        (["cuda", "cpu", "auto"], 2, ["cuda:0", "cpu", "cuda:1"]),  # 'cuda' is cuda:0; cpu stays
        (["cuda:1", "cuda:1", "auto"], 2, ["cuda:1", "cuda:1", "cuda:0"]),
        (["mps", "cpu", "cpu"], 0, ["mps", "cpu", "cpu"]),
    ],
)
def test_place_agents(requested, n_gpus, expected):
    assert place_agents(NAMES, requested, n_gpus) == dict(zip(NAMES, expected))


@pytest.mark.parametrize(
    "requested,n_gpus,message",
    [
        (["auto", "cuda:2", "auto"], 2, "b: device 'cuda:2' but 2 GPU"),
        (["cuda", "auto", "auto"], 0, "a: device 'cuda' but no GPU visible"),
        (["auto", "auto", "tpu"], 1, "c: device 'tpu' is not"),
    ],
)
def test_place_agents_rejects_devices_that_are_not_there(requested, n_gpus, message):
    with pytest.raises(ValueError, match=message):
        place_agents(NAMES, requested, n_gpus)


def test_agent_devices_reads_the_config_and_names_the_key():
    members = {"a": AgentConfig(), "b": AgentConfig(device="cpu"), "c": AgentConfig(device="cuda:1")}
    config = Config(agents=AgentsConfig(members=members), trainer=TrainerConfig(device="auto"))
    placed = agent_devices(config, n_gpus=2)
    assert placed == {"a": torch.device("cuda:0"), "b": torch.device("cpu"), "c": torch.device("cuda:1")}
    with pytest.raises(ConfigError, match=r"agents\.members\.c\.device: c: device 'cuda:1' but no GPU visible"):
        agent_devices(config, n_gpus=0)
    config.trainer.device = "cuda:3"
    members["c"].device = None
    with pytest.raises(ConfigError, match=r"agents\.members\.a\.device"):  # the agent whose placement failed
        agent_devices(config, n_gpus=1)


def _agent(device="cpu", **cfg):
    tokenizer = build_tokenizer("char", "0123456789+=")
    model = build_tiny_model("llama", tokenizer, 32, 2, 4)
    args = dict(device=torch.device(device), kl_coef=0.1, max_prompt_tokens=16, max_batch_size=8)
    return build_agent("a", AgentConfig(**cfg), model, tokenizer, **args)


def test_memory_metrics_count_weights_gradients_and_adam_state_exactly():
    agent = _agent()
    n = sum(p.numel() for p in agent.model.parameters())
    tensors = len(list(agent.model.parameters()))
    before = memory_metrics([agent])["a"]
    assert before["memory/params_mib"] == pytest.approx(4 * n / 2**20)
    assert before["memory/trainable_params"] == n
    assert before["memory/reference_mib"] == pytest.approx(4 * n / 2**20)  # kl_coef > 0: a full frozen copy
    assert before["memory/grads_mib"] == before["memory/optimizer_mib"] == 0
    assert "memory/gpu_peak_mib" not in before  # CPU: no device peak to report
    ids = torch.tensor([[4, 5, 6, 7]])
    agent.model(input_ids=ids, labels=ids).loss.backward()
    agent.optimizer.step()
    after = memory_metrics([agent])["a"]
    assert after["memory/grads_mib"] == pytest.approx(4 * n / 2**20)
    # AdamW: exp_avg and exp_avg_sq per weight, plus a float32 step counter per tensor
    assert after["memory/optimizer_mib"] == pytest.approx((8 * n + 4 * tensors) / 2**20)


@CUDA
def test_memory_metrics_report_the_device_peak_on_cuda():
    agent = _agent("cuda")
    ids = torch.tensor([[4, 5, 6, 7]], device="cuda")
    agent.model(input_ids=ids, labels=ids).loss.backward()
    metrics = memory_metrics([agent], reset_peak=True)["a"]
    assert metrics["memory/gpu_peak_mib"] >= metrics["memory/params_mib"] + metrics["memory/grads_mib"]
    # after the reset the peak no longer counts the forward's activations
    assert memory_metrics([agent])["a"]["memory/gpu_peak_mib"] < metrics["memory/gpu_peak_mib"]
