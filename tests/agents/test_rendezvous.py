"""Where a sharded agent's rank group meets (hacrl_exp.agents.sharding): the rendezvous host chosen from the ranks'
node addresses, the interface gloo binds, and a real two-rank gloo group on this machine's non-loopback address (the
path ranks on several nodes take; the simulated Ray cluster of tests/trainer/test_fsdp.py gives every node
127.0.0.1, so it takes the loopback path)."""

from __future__ import annotations

import ipaddress
import os
import socket

import pytest
import torch

from hacrl_exp.agents.sharding import LOOPBACK, _interfaces, interface_of, rendezvous_host, store_socket
from hacrl_exp.errors import ConfigError
from tests.gloo_ranks import run_ranks


def test_the_rendezvous_is_loopback_on_one_node_and_rank_zeros_address_across_nodes():
    assert rendezvous_host(["10.0.0.1"]) == LOOPBACK
    assert rendezvous_host(["10.0.0.1", "10.0.0.1", "10.0.0.1"]) == LOOPBACK
    assert rendezvous_host(["10.0.0.2", "10.0.0.1"]) == "10.0.0.2"
    assert rendezvous_host(["10.0.0.1", "10.0.0.1", "10.0.0.3"]) == "10.0.0.1"
    assert rendezvous_host(["fd00::2", "fd00::3"]) == "fd00::2"


def test_the_store_never_binds_every_interface():
    for host in ("0.0.0.0", "::"):
        with pytest.raises(ValueError, match="not .* \\(every interface\\)"):
            store_socket(host)
    with store_socket() as sock:
        assert sock.getsockname()[0] == LOOPBACK


def test_gloo_binds_the_interface_that_holds_the_nodes_address():
    interfaces = {"lo": ["127.0.0.1", "::1"], "docker0": ["172.17.0.1"], "eth0": ["10.0.0.2", "fe80::1"]}
    assert interface_of("10.0.0.2", interfaces) == "eth0"
    assert interface_of("127.0.0.1", interfaces) == "lo"
    assert interface_of("127.0.0.1", {}) == "lo"  # loopback needs no lookup
    with pytest.raises(ConfigError, match="no network interface of this node holds .* 10.0.0.9; set GLOO_SOCKET_IF"):
        interface_of("10.0.0.9", interfaces)


def test_a_group_on_one_node_binds_gloo_to_loopback_whatever_its_node_address(monkeypatch):
    """On one node (the store on 127.0.0.1) gloo takes loopback even where Ray reports another node address."""
    from hacrl_exp.agents.sharding import init_rank_group

    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    with pytest.raises(ValueError, match="rank 0 hosts the rendezvous store"):  # after the interface is chosen
        init_rank_group(0, 2, 1, torch.device("cpu"), None, LOOPBACK, "10.9.9.9")
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo"


def _outside_address() -> tuple[str, str] | None:
    """(an IPv4 address of this machine that is not loopback, its interface), or None."""
    for name, addresses in _interfaces().items():
        for address in addresses:
            if "." in address and not ipaddress.ip_address(address).is_loopback:
                return address, name
    return None


def _rank(rank: int, ports, host: str, folder: str) -> None:
    from hacrl_exp.agents.sharding import init_rank_group

    torch.set_num_threads(1)
    os.environ.pop("GLOO_SOCKET_IFNAME", None)  # chosen by init_rank_group from the node's address
    listening = store_socket(host) if rank == 0 else None
    refused = None
    if listening is not None:
        port = listening.getsockname()[1]
        try:
            socket.create_connection((LOOPBACK, port), timeout=5).close()
            refused = False
        except ConnectionRefusedError:
            refused = True
        ports.put(port)
    else:
        port = ports.get(timeout=120)
    init_rank_group(rank, 2, port, torch.device("cpu"), listening, host, host)
    total = torch.tensor([rank + 1.0])
    torch.distributed.all_reduce(total)
    result = {"sum": total.item(), "ifname": os.environ["GLOO_SOCKET_IFNAME"], "loopback_refused": refused}
    torch.distributed.destroy_process_group()
    torch.save(result, f"{folder}/rank{rank}.pt")


def test_two_ranks_meet_on_a_non_loopback_address_and_gloo_uses_its_interface(tmp_path):
    """What ranks on two nodes do, on one machine: rank 0's store listens on the node's address only (127.0.0.1
    refuses its port), both ranks' gloo pairs bind the interface holding that address, and an all-reduce works."""
    outside = _outside_address()
    if outside is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    host, interface = outside
    run_ranks(_rank, 2, host, str(tmp_path))
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    assert [r["sum"] for r in results] == [3.0, 3.0]
    assert [r["ifname"] for r in results] == [interface, interface]
    assert results[0]["loopback_refused"] is True
