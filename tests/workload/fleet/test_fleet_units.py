"""Pure parts of `doctor fleet`: launcher variables (recorded Slurm environments), the network
facts read through a Host over a fake root, the N-way comparison and the verdicts."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path

import pytest

from doctor.diagnose.diff import Input, compare_many
from doctor.diagnose.fleet import fleet_report, network_area, node_names
from doctor.errors import UsageError
from doctor.host import Host
from doctor.model import Level
from doctor.workload.fleet.collectives import bus_factor
from doctor.workload.fleet.launcher import expand_nodelist, first_host, read_launch
from doctor.workload.fleet.network import ifname_state, memlock, node_network, parse_getent, reach, shm_facts

FIXTURES = Path(__file__).parent / "fixtures"


def recorded_env(name: str) -> dict[str, str]:
    lines = (FIXTURES / name).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


# -- launcher --


def test_srun_task_from_a_recorded_environment():
    env = recorded_env("slurm-srun-N1-n4.env")
    launch = read_launch(env)
    assert (launch.launcher, launch.rank, launch.world_size, launch.local_rank, launch.node_rank) == ("slurm", 1, 4, 1, 0)
    # no MASTER_ADDR: the first host of the node list hosts the store, on the default port
    assert (launch.master_addr, launch.master_port) == ("t-cn0117", 29500)
    assert not launch.gatherer  # local task 1 shares the node's facts


def test_salloc_without_srun_is_not_a_launch():
    # a shell inside an allocation has SLURM_PROCID but no SLURM_NTASKS: nothing to join
    assert read_launch(recorded_env("slurm-perlmutter-salloc.env")) is None


def test_master_addr_wins_over_the_node_list():
    env = recorded_env("slurm-srun-N1-n4.env") | {"MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29611"}
    launch = read_launch(env)
    assert (launch.master_addr, launch.master_port) == ("10.1.2.3", 29611)


def test_torchrun_variables_take_precedence_and_agent_store():
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "GROUP_RANK": "1", "MASTER_ADDR": "node0",
           "MASTER_PORT": "41000", "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "2",
           "SLURM_PROCID": "0", "SLURM_NTASKS": "2"}
    launch = read_launch(env)
    assert (launch.launcher, launch.rank, launch.node_rank, launch.agent_store, launch.restart_count) == \
        ("torchrun", 3, 1, True, 2)


def test_open_mpi_and_pmi():
    ompi = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "MASTER_ADDR": "head"}
    assert (read_launch(ompi).launcher, read_launch(ompi).rank, read_launch(ompi).master_port) == ("openmpi", 2, 29500)
    pmi = {"PMI_RANK": "0", "PMI_SIZE": "2", "MASTER_ADDR": "head", "MASTER_PORT": "5000"}
    assert (read_launch(pmi).launcher, read_launch(pmi).world_size, read_launch(pmi).master_port) == ("pmi", 2, 5000)


@pytest.mark.parametrize("env, words", [
    ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "RANK=2 is not below WORLD_SIZE=2"),
    ({"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "RANK='x'"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "70000"}, "MASTER_PORT='70000'"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h;rm -rf /"}, "is not a host name"),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}, "MASTER_ADDR is not set"),
])
def test_bad_launcher_values_are_one_usage_error(env, words):
    with pytest.raises(UsageError) as err:
        read_launch(env)
    assert words in err.value.message and err.value.exit_code == 2


def test_no_launcher():
    assert read_launch({"PATH": "/bin", "HOME": "/root"}) is None


# Written as Slurm writes node lists: ranges with zero padding, several brackets in one name,
# blanks and empty entries between names.
NODE_LISTS = ["gpu[07-09,12],cpu1", "t-cn0117", "rack[1-2]-n[01-04]", "n[1-2][3-4]", "n[010-012]", "n[9-11]",
              "n-[1-2]", "[1-2]", "n[1-2],,m1", "n[1-2] m1", "a,b"]


def test_slurm_node_lists_expand_as_scontrol_expands_them(tmp_path):
    """`scontrol show hostnames` (slurm-client, installed by scripts/test) is the oracle; it
    needs only a configuration file to read, no controller."""
    import os
    import subprocess

    from testsupport.emit_helpers import need

    need("scontrol")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=probe\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1 State=UNKNOWN\n"
                    "PartitionName=p Nodes=localhost Default=YES\n")
    env = {"PATH": os.environ["PATH"], "SLURM_CONF": str(conf)}
    for text in NODE_LISTS:
        out = subprocess.run(["scontrol", "show", "hostnames", text], env=env, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert expand_nodelist(text) == out.stdout.split(), text
        assert first_host(text) == out.stdout.split()[0]
    for text in ["n[3-1]", "n[a-b]"]:  # refused by both
        out = subprocess.run(["scontrol", "show", "hostnames", text], env=env, capture_output=True, text=True, timeout=30)
        assert "Invalid hostlist" in out.stdout + out.stderr
        with pytest.raises(ValueError):
            expand_nodelist(text)
    # An unclosed bracket: scontrol prints "node]" and "5"; the doctor refuses it.
    with pytest.raises(ValueError, match="unmatched bracket"):
        expand_nodelist("node[1-3,5")
    with pytest.raises(ValueError, match="more than 8 bracketed lists"):  # a RecursionError (exit 3) before
        expand_nodelist("n" + "[1]" * 20000)
    assert expand_nodelist("n" + "[1]" * 8) == ["n11111111"]
    assert len(expand_nodelist("n[0-99999999]", limit=10)) == 10
    assert expand_nodelist("a[1-3][1-99999999]", limit=2) == ["a11", "a12"]
    assert first_host("node[1-3]-ib") == "node1-ib"  # a suffix: Slurm 22.05 refuses it, later ones write it


def test_the_store_host_is_the_first_of_the_node_list():
    env = recorded_env("slurm-srun-N1-n4.env")  # srun sets both; the job's list is read first
    lists = {"SLURM_JOB_NODELIST": "rack[1-2]-n[01-04]", "SLURM_NODELIST": "rack[1-2]-n[01-04]"}
    assert read_launch(env | lists).master_addr == "rack1-n01"
    with pytest.raises(UsageError) as err:
        read_launch(env | {"SLURM_JOB_NODELIST": "node[1-3,5"})
    assert err.value.message.startswith("SLURM_JOB_NODELIST='node[1-3,5' is not a Slurm host list: an unmatched bracket")
    assert "scontrol show hostnames" in err.value.hint and err.value.exit_code == 2


# -- network facts (Host over a fake root; real formats) --


GETENT = "10.0.0.5       STREAM node0\n10.0.0.5       DGRAM  \n10.0.0.5       RAW    \n"
DOCKER_MOUNTS = "overlay / overlay rw,relatime 0 0\nshm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n"
LIMITS = ("Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max locked memory         8388608              8388608              bytes     \n")


def fake_root(tmp_path: Path, getent: str = GETENT, getent_rc: int = 0) -> Path:
    files = {"sys/class/net/lo/operstate": "unknown\n", "sys/class/net/eth0/operstate": "up\n",
             "sys/class/net/ib0/operstate": "down\n", "proc/mounts": DOCKER_MOUNTS, "proc/self/limits": LIMITS,
             "proc/meminfo": "MemTotal:       16303412 kB\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "dev/shm").mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin/getent"
    script.write_text(f"#!/bin/sh\nprintf '%s' '{getent}'\nexit {getent_rc}\n")
    script.chmod(0o755)
    return tmp_path


def test_node_network_reads_the_fake_root(tmp_path):
    host = Host.for_test(fake_root(tmp_path), env={"NCCL_SOCKET_IFNAME": "eth", "GLOO_SOCKET_IFNAME": "ib0,eth9",
                                                    "NCCL_DEBUG": "INFO", "PATH": str(tmp_path / "bin")})
    net = node_network(host, "node0", 29500)
    assert net["master_addresses"] == ["10.0.0.5"] and not net["master_loopback"]
    assert net["interfaces"] == {"eth0": "up", "ib0": "down", "lo": "unknown"}
    assert net["socket_ifname"]["NCCL_SOCKET_IFNAME"]["matched"] == ["eth0"]
    gloo = net["socket_ifname"]["GLOO_SOCKET_IFNAME"]
    assert (gloo["missing"], gloo["down"]) == (["eth9"], ["ib0"])
    assert net["shm"]["size_bytes"] == 64 << 20 and net["memlock"]["soft_bytes"] == 8 << 20
    assert net["env"] == {"GLOO_SOCKET_IFNAME": "ib0,eth9", "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth"}


def test_unresolvable_master(tmp_path):
    host = Host.for_test(fake_root(tmp_path, getent="", getent_rc=2))
    net = node_network(host, "nosuch.invalid", 29500)
    assert net["master_addresses"] == [] and "does not resolve" in net["master_resolve_error"]


def test_parsers_on_real_text():
    assert parse_getent("127.0.0.1       STREAM localhost\n127.0.0.1       DGRAM  \n::1 STREAM localhost\n") == ["127.0.0.1", "::1"]
    host_line = "tmpfs /dev/shm tmpfs rw,relatime,size=24684092k 0 0\n"  # this machine
    assert shm_facts(host_line, "", None)["size_bytes"] == 24684092 * 1024
    default = shm_facts("tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0\n", "MemTotal:       16303412 kB\n", None)
    assert default["size_bytes"] == 16303412 * 512 and "half of RAM" in default["source"]
    assert memlock("Max locked memory         unlimited            unlimited            bytes\n")["soft_bytes"] is None
    assert ifname_state("^docker,lo", {"eth0": "up"})["exclusion"]
    assert ifname_state("=eth", {"eth0": "up"})["missing"] == ["eth"]  # '=' asks for the exact name


def test_reach_a_real_listening_port_and_a_closed_one():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert reach("127.0.0.1", port, 2)["reachable"]
    closed = reach("127.0.0.1", port, 2)
    assert not closed["reachable"] and "ConnectionRefused" in closed["error"]


# -- comparing N reports, and the verdicts --


def check_report(torch="2.13.0", driver="570.124.06", findings=()) -> dict:
    return {"facts": {"python_torch": {"version": torch}, "gpu": {"nvidia": {"driver_version": driver}},
                      "libtorch": {}, "system": {"os": "Linux"}, "env": {}},
            "findings": [{"id": f, "level": "warning", "title": f} for f in findings]}


def test_compare_many_groups_values_with_their_nodes():
    inputs = [Input("a", check_report()), Input("b", check_report(driver="575.64.03", findings=["disk.low"])),
              Input("c", check_report())]
    spreads = {s.fact.label: s.values for s in compare_many(inputs)}
    assert spreads["NVIDIA driver"] == (("570.124.06", ("a", "c")), ("575.64.03", ("b",)))
    assert spreads["problem disk.low"] == (("not reported", ("a", "c")), ("reported", ("b",)))
    assert "torch version" not in spreads  # the same everywhere
    assert compare_many(inputs[:1]) == []


def payload(rank, host, node, report, net=None) -> dict:
    return {"rank": rank, "local_rank": 0, "node_rank": node, "host": host, "report": report,
            "network": net or {}, "nccl": ["", "no CUDA"]}


def test_loopback_master_is_an_error_only_when_hosts_differ():
    net = {"master_addr": "localhost", "master_port": 29500, "master_addresses": ["127.0.0.1"], "master_loopback": True}
    one_host = [payload(0, "vm", 0, check_report(), net), payload(1, "vm", 1, check_report(), net)]
    assert not network_area(node_names(one_host), one_host, 2).findings
    two_hosts = [payload(0, "n0", 0, check_report(), net), payload(1, "n1", 1, check_report(), net)]
    area = network_area(node_names(two_hosts), two_hosts, 2)
    assert [f.id for f in area.findings] == ["dist.master-addr", "dist.master-addr"]
    assert "loopback" in area.findings[0].title


def test_small_shm_and_missing_interface_findings():
    net = {"master_addr": "10.0.0.5", "master_port": 29500, "master_addresses": ["10.0.0.5"], "master_loopback": False,
           "interfaces": {"eth0": "up", "lo": "unknown"},
           "socket_ifname": {"NCCL_SOCKET_IFNAME": ifname_state("ib", {"eth0": "up", "lo": "unknown"})},
           "shm": shm_facts(DOCKER_MOUNTS, "", None), "memlock": memlock(LIMITS),
           "port": {"reachable": False, "error": "ConnectionRefusedError: [Errno 111] Connection refused"}}
    payloads = [payload(0, "n0", 0, check_report(), net)]
    by_id = {f.id: f for f in network_area(node_names(payloads), payloads, 1).findings}
    assert by_id["dist.socket-ifname"].level is Level.ERROR and "eth0" in by_id["dist.socket-ifname"].fix
    assert by_id["nccl.shm-small"].title == "n0: /dev/shm is 64 MiB"
    assert by_id["dist.port-unreachable"].level is Level.ERROR
    assert by_id["nccl.memlock-low"].level is Level.INFO


def test_fleet_report_from_recorded_results():
    ok = {"all_reduce": "", "all_gather": "", "broadcast": ""}
    training = {"ranks": 2, "steps": 30, "grad_error": 2e-8, "param_spread": 0.0, "first_loss": 1.3, "last_loss": 0.2,
                "error": ""}
    payloads = [payload(0, "vm", 0, check_report()), payload(1, "vm", 1, check_report(torch="2.12.0"))]
    results = [{"rank": 0, "gloo": ok, "nccl": {}, "training": training},
               {"rank": 1, "gloo": ok | {"all_reduce": "sum wrong by up to 1"}, "nccl": {}, "training": training}]
    rows = [{"op": "all_reduce", "bytes": 1024, "seconds": 1e-3, "algbw_gbs": 0.001024, "busbw_gbs": 0.001024}]
    report = fleet_report({"launcher": "torchrun"}, payloads, results, {"sweep": rows, "latency": {"all_reduce": 300.0}},
                          {"skipped": "no GPU"})
    ids = [f.id for f in report.findings if f.level is Level.ERROR]
    assert ids == ["fleet.differs", "fleet.collective-failed"]
    assert report.facts["comparison"][0]["values"] == [{"value": "2.13.0", "nodes": ["vm:node0"]},
                                                       {"value": "2.12.0", "nodes": ["vm:node1"]}]
    assert report.exit_code() == 1
    differs = next(f for f in report.findings if f.id == "fleet.differs")
    assert differs.fix == "make vm:node1 use the torch vm:node0 uses: pip install 'torch==2.13.0'"
    json.dumps(copy.deepcopy(report.facts))  # the envelope's facts are plain JSON


def test_nccl_tests_bus_bandwidth_factors():
    # nccl-tests doc/PERFORMANCE.md: all_reduce 2(n-1)/n, all_gather (n-1)/n, broadcast 1
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 4) == 3 / 4
    assert bus_factor("broadcast", 16) == 1.0


# -- the store --


def test_on_windows_the_store_is_the_libuv_free_server_and_it_serves_its_ranks():
    """torch's Windows builds have no libuv (findings/dist.no-libuv): fleet asks for the old server
    there. This machine's torch has both, so the real store shows which one was made and that the
    old one serves a second rank; elsewhere the default stays."""
    import torch

    from doctor.workload.fleet.gather import open_store

    def launch(rank: int, port: int):
        return read_launch({"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
                            "MASTER_PORT": str(port)})

    for system, libuv in (("Windows", False), ("Linux", True)):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = open_store(torch, launch(0, port), 10, system)
        client = open_store(torch, launch(1, port), 10, system)
        assert (server.libuvBackend, client.libuvBackend) == (libuv, libuv)
        client.set("doctor-fleet/test", "joined")
        assert server.get("doctor-fleet/test") == b"joined"


def test_a_value_with_a_newline_stays_in_its_row():
    from doctor.model import Area, Report
    from doctor.workload.fleet.tables import text_tables

    report = Report("fleet", {}, [Area("nodes", "Nodes", "2 nodes", details=["node  ranks  torch", "a\nb  0,1  2.13.0"])])
    assert text_tables(report).splitlines() == ["Nodes", "  node  ranks  torch", "  a\\nb  0,1  2.13.0"]
