"""dist.store-timeout from a client that could not connect to the store: the advice names the
address the log gives, and says what it is when that alone explains the failure.

The corpus logs are in tests/fixtures/logs (dist.store-timeout--*.log); these are the variants
beyond them, and the addresses that must not reach the advice's command."""

from __future__ import annotations

import subprocess

import pytest

from doctor.explain import explain_text

LINE = "[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while trying to connect to ({host}, {port})."


def _finding(host: str, port: str = "29500"):
    [finding] = explain_text(LINE.format(host=host, port=port))
    assert finding.id == "dist.store-timeout"
    return finding


def test_the_address_is_named_with_a_command_to_try_it():
    f = _finding("10.1.2.3", "37907")
    assert f.title == "a rank could not reach the rendezvous store at 10.1.2.3:37907"
    assert "nc -zv 10.1.2.3 37907" in f.fix and "doctor fleet" in f.fix
    assert "loopback" not in f.detail and "Docker" not in f.detail


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_a_loopback_address_is_said_to_be_one(host):
    assert f"{host} is a loopback address" in _finding(host).detail


def test_a_container_id_for_a_hostname_is_said_to_be_one():
    f = _finding("036c56dce41b", "41331")
    assert "hostname Docker gives a container" in f.detail and "--network host" in f.detail
    assert "Docker" not in _finding("gpu-node-12").detail


@pytest.mark.parametrize("host,port", [("PRIVATE_IP", "PORT"), ("a;touch${IFS}/tmp/x", "1"), ("host`id`", "29500"),
                                       ("10.0.0.1", "99999"), ("-oProxyCommand=x", "22")])
def test_an_address_that_is_no_address_gets_the_rules_own_advice(host, port, tmp_path):
    """A redacted address, or a hostile log's text: never into the command shown."""
    f = _finding(host, port)
    assert f.title == "a rank waited for the rendezvous store in vain" and "nc -zv" not in f.fix
    assert host not in f.fix


def test_the_shown_command_is_the_one_a_shell_runs():
    f = _finding("node-3.cluster.internal", "29500")
    command = f.fix.split("(", 1)[1].split(")", 1)[0]
    argv = subprocess.run(["bash", "-c", 'printf "%s\\n" ' + command], capture_output=True, text=True, check=True)
    assert argv.stdout.splitlines() == ["nc", "-zv", "node-3.cluster.internal", "29500"]
