"""`doctor cache-key`: stable, short, distinct per tree, and resolved like fetch-libtorch."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from testsupport.ci_support import doctor_env, run_doctor

from doctor.commands.cache_key import KeyParts, command, resolve
from doctor.host import Host

KEY = re.compile(r"^libtorch-(?P<readable>[0-9a-z_.+-]+)-(?P<hash>[0-9a-f]{8})$")


def key(*args: str) -> str:
    result = CliRunner().invoke(command, list(args), standalone_mode=False, catch_exceptions=False)
    assert result.return_value == 0, result.output
    return result.output.strip()


def test_key_names_the_tree_and_is_stable():
    first = key("--version", "2.13.0", "--variant", "cpu", "--platform", "linux-x86_64")
    assert KEY.match(first) and first.startswith("libtorch-2.13.0-cpu-cxx11-linux-x86_64-")
    assert key("--version", "2.13.0", "--variant", "cpu", "--platform", "linux-x86_64") == first
    assert key("--variant", "cpu", "--version", "2.13.0", "--abi", "cxx11", "--platform", "linux-x86_64") == first


@pytest.mark.parametrize(
    ("args", "readable"),
    [
        (["--version", "2.6.0", "--variant", "cu124", "--abi", "pre-cxx11"], "2.6.0-cu124-pre-cxx11-linux-x86_64"),
        (["--version", "2.9.1", "--variant", "cpu", "--platform", "macos-arm64"], "2.9.1-cpu-macos-arm64"),
        (["--version", "2.13.0", "--variant", "cu130", "--platform", "windows-x86_64"], "2.13.0-cu130-windows-x86_64"),
        (["--version", "2.13.0", "--variant", "cpu", "--platform", "linux-aarch64", "--from-wheel"],
         "2.13.0-cpu-cxx11-linux-aarch64-wheel"),
    ],
)
def test_each_tree_gets_its_own_key(args, readable):
    assert KEY.match(key(*args)).group("readable") == readable


def test_every_part_and_the_salt_change_the_hash():
    base = KeyParts("2.13.0", "cpu", "cxx11", "linux-x86_64", "url", "libtorch-shared-with-deps-2.13.0+cpu.zip")
    variants = [
        base.key(), base.key(salt="2"),
        KeyParts("2.13.1", *list(vars(base).values())[1:]).key(),
        KeyParts("2.13.0", "cpu", "cxx11", "linux-x86_64", "url", "renamed.zip").key(),
    ]
    hashes = [KEY.match(k).group("hash") for k in variants]
    assert len(set(hashes)) == len(hashes)


def test_defaults_come_from_the_fetch_plan(tmp_path):
    # A host with no Python torch and no GPU: fetch-libtorch would take the newest listed cpu build.
    from doctor.catalog.releases import newest_version

    parts = resolve(Host.for_test(tmp_path))
    assert (parts.version, parts.variant, parts.abi, parts.platform) == (newest_version(), "cpu", "cxx11", "linux-x86_64")


def test_defaults_here_follow_the_python_torch(tmp_path):
    result = run_doctor(["cache-key", "--json"], cwd=tmp_path, env=doctor_env(tmp_path))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["version"], data["variant"], data["abi"]) == ("2.13.0", "cpu", "cxx11")
    assert data["file_name"] == "libtorch-shared-with-deps-2.13.0+cpu.zip"
    assert data["key"] == key("--version", "2.13.0", "--variant", "cpu")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--version", "2.13.0", "--variant", "cpu", "--abi", "pre-cxx11"], "CXX11 ABI only"),
        (["--version", "2.13.0", "--variant", "cu13"], "has no cu13 build"),
        (["--version", "2.13.0", "--variant", "cu130", "--platform", "macos-arm64"], "CPU-only"),
        (["--version", "2.13", "--variant", "cpu"], "expected MAJOR.MINOR.PATCH"),
        (["--version", "2.13.0", "--variant", "cpu", "--platform", "solaris-sparc"], "unknown platform"),
    ],
)
def test_impossible_trees_exit_2(tmp_path, args, message):
    result = run_doctor(["cache-key", *args], cwd=tmp_path, env=doctor_env(tmp_path))
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and result.stdout == ""
