"""Resolving a request into a plan, on test hosts: defaults from the host's facts, the
destination layout, and clear refusals for contradictory or unsafe options."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.catalog.releases import CatalogError
from doctor.errors import UsageError
from doctor.fetch.plan import FetchRequest, resolve_plan
from doctor.host import Host


def host_with_torch(tmp_path: Path, version_py: str | None, **kw) -> Host:
    if version_py is not None:
        (tmp_path / "site/torch").mkdir(parents=True)
        (tmp_path / "site/torch/version.py").write_text(version_py)
    (tmp_path / "bin").mkdir(exist_ok=True)  # no nvidia-smi, no rocm-smi: no GPU
    return Host.for_test(tmp_path, sys_path=["/site"], **kw)


def test_defaults_from_the_installed_python_torch(tmp_path, wheel_root):
    host = host_with_torch(tmp_path, (wheel_root / "version.py").read_text())
    plan = resolve_plan(host, FetchRequest())
    assert (plan.version, plan.variant, plan.abi, plan.platform) == ("2.13.0", "cpu", "cxx11", "linux-x86_64")
    assert plan.url == "https://download.pytorch.org/libtorch/cpu/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"
    assert plan.dest == Path("/home/user/.cache/libtorch/2.13.0/linux-x86_64/cpu")
    assert plan.lock_path == Path("/work/libtorch.lock") and plan.lock_key == "2.13.0/linux-x86_64/cpu/cxx11"
    assert any("the installed Python torch is 2.13.0+cpu" in n for n in plan.notes)
    assert any(n.startswith("variant cpu (auto): ") for n in plan.notes)


def test_without_python_torch_the_newest_release(tmp_path):
    plan = resolve_plan(host_with_torch(tmp_path, None), FetchRequest(variant="cpu"))
    assert plan.version == "2.13.0"
    assert any("newest in the release table" in n for n in plan.notes)


def test_a_dev_python_torch_falls_back_to_the_newest_listed(tmp_path):
    host = host_with_torch(tmp_path, "__version__ = '2.14.0.dev20260101+cpu'\ncuda = None\n")
    plan = resolve_plan(host, FetchRequest(variant="cpu"))
    assert plan.version == "2.13.0"
    assert any("2.14.0.dev20260101+cpu is not a listed release" in n for n in plan.notes)


@pytest.mark.parametrize("env, system, expected", [
    ({"LIBTORCH_HOME": "/data/lt"}, "Linux", "/data/lt/2.13.0/linux-x86_64/cpu"),
    ({"XDG_CACHE_HOME": "/xdg"}, "Linux", "/xdg/libtorch/2.13.0/linux-x86_64/cpu"),
    ({"XDG_CACHE_HOME": "relative/ignored"}, "Linux", "/home/user/.cache/libtorch/2.13.0/linux-x86_64/cpu"),
    # Hasktorch uses the XDG cache on macOS too, not ~/Library/Caches
    ({}, "Darwin", "/home/user/.cache/libtorch/2.13.0/macos-arm64/cpu"),
])
def test_hasktorch_cache_layout(tmp_path, env, system, expected):
    host = Host.for_test(tmp_path, env=env, system=system, machine="arm64" if system == "Darwin" else "x86_64")
    plan = resolve_plan(host, FetchRequest(version="2.13.0", variant="cpu"))
    assert plan.dest == Path(expected)


def test_builds_hasktorch_cannot_use_get_their_own_folder(tmp_path):
    host = Host.for_test(tmp_path)
    old = resolve_plan(host, FetchRequest(version="2.6.0", variant="cu124", abi="pre-cxx11"))
    assert old.dest.name == "cu124-pre-cxx11"
    assert old.file_name == "libtorch-shared-with-deps-2.6.0+cu124.zip"
    win = resolve_plan(host, FetchRequest(version="2.13.0", variant="cu130", platform="windows-x86_64", debug=True))
    assert win.dest.name == "cu130-debug" and win.abi is None and win.lock_key.endswith("/any/debug")


def test_variant_riding_on_the_version(tmp_path):
    plan = resolve_plan(Host.for_test(tmp_path), FetchRequest(version="2.13.0+cu130"))
    assert (plan.version, plan.variant) == ("2.13.0", "cu130")


def test_linux_aarch64_needs_a_wheel(tmp_path):
    host = Host.for_test(tmp_path, machine="aarch64")
    with pytest.raises(CatalogError, match="no libtorch zip for linux-aarch64") as err:
        resolve_plan(host, FetchRequest(version="2.13.0", variant="cpu"))
    assert err.value.hint == "use --from-wheel"
    plan = resolve_plan(host, FetchRequest(version="2.13.0", variant="cpu", from_wheel=True))
    assert (plan.source, plan.platform, plan.abi) == ("wheel", "linux-aarch64", "cxx11")
    assert plan.lock_key == "2.13.0/linux-aarch64/cpu/cxx11/wheel"


def test_wheels_have_one_abi_per_release(tmp_path):
    host = Host.for_test(tmp_path)
    with pytest.raises(UsageError, match="torch 2.13.0 wheels use the cxx11 ABI"):
        resolve_plan(host, FetchRequest(version="2.13.0", variant="cpu", from_wheel=True, abi="pre-cxx11"))
    assert resolve_plan(host, FetchRequest(version="2.5.1", variant="cpu", from_wheel=True)).abi == "pre-cxx11"


def test_url_file_name_says_version_variant_and_abi(tmp_path):
    plan = resolve_plan(Host.for_test(tmp_path), FetchRequest(
        url="https://mirror.example/x/libtorch-shared-with-deps-2.6.0%2Bcu124.zip"))
    assert (plan.version, plan.variant, plan.abi, plan.source) == ("2.6.0", "cu124", "pre-cxx11", "url")
    assert plan.file_name == "libtorch-shared-with-deps-2.6.0+cu124.zip" and not plan.listed
    with pytest.raises(UsageError, match="cannot tell the libtorch version"):
        resolve_plan(Host.for_test(tmp_path), FetchRequest(url="https://mirror.example/custom.zip"))


def test_mirror_from_the_environment(tmp_path):
    host = Host.for_test(tmp_path, env={"DOCTOR_LIBTORCH_MIRROR": "https://mirror.corp/libtorch"})
    plan = resolve_plan(host, FetchRequest(version="2.13.0", variant="cu130"))
    assert plan.url == "https://mirror.corp/libtorch/cu130/libtorch-shared-with-deps-2.13.0%2Bcu130.zip"
    assert any("$DOCTOR_LIBTORCH_MIRROR" in n for n in plan.notes)


def test_nightly_has_no_version_and_no_lock(tmp_path):
    plan = resolve_plan(Host.for_test(tmp_path), FetchRequest(variant="cu130", channel="nightly"))
    assert plan.version is None and plan.lock_path is None
    assert plan.dest == Path("/home/user/.cache/libtorch/nightly/linux-x86_64/cu130")


@pytest.mark.parametrize("req, message", [
    (FetchRequest(url="https://x/a.zip", archive=Path("/a.zip")), "alternative sources"),
    (FetchRequest(url="https://x/a.zip", mirror="https://m"), "--mirror replaces"),
    (FetchRequest(url="http://x/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"), "refusing plain HTTP"),
    (FetchRequest(url="file:///tmp/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"), "use --archive"),
    (FetchRequest(mirror="http://mirror.local", version="2.13.0", variant="cpu"), "refusing plain HTTP"),
    (FetchRequest(version="2.13.0", variant="cpu", sha256="abc"), "not 64 hex digits"),
    (FetchRequest(version="2.13", variant="cpu"), "expected MAJOR.MINOR.PATCH"),
    (FetchRequest(version="2.13.0", variant="cpu", platform="macos-arm64", abi="cxx11"), "Linux only"),
    (FetchRequest(version="2.13.0", variant="cpu", from_wheel=True, debug=True), "Windows zips"),
    (FetchRequest(archive=Path("/nope/libtorch-shared-with-deps-2.13.0+cpu.zip")), "no such file"),
    # urllib3 refuses these host names only when it connects, with an exception nothing expected
    (FetchRequest(url="https://download..pytorch.org/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"), "empty label"),
    (FetchRequest(mirror="https://" + "a" * 64 + ".example", version="2.13.0", variant="cpu"), "one over 63"),
    (FetchRequest(mirror="https://.example", version="2.13.0", variant="cpu"), "empty label"),
    # `--version "$UNSET"` took the default; a label that contradicts --variant was dropped
    (FetchRequest(version="", variant="cpu"), "--version is empty"),
    (FetchRequest(version="2.13.0+cu130", variant="cpu"), "names the variant cu130, but --variant is cpu"),
])
def test_refusals(tmp_path, req, message):
    with pytest.raises(UsageError, match=message):
        resolve_plan(Host.for_test(tmp_path), req)


def test_http_allowed_when_asked(tmp_path):
    plan = resolve_plan(Host.for_test(tmp_path), FetchRequest(
        mirror="http://127.0.0.1:8000", version="2.13.0", variant="cpu", allow_http=True))
    assert plan.url.startswith("http://127.0.0.1:8000/cpu/")


def test_unlisted_version(tmp_path):
    with pytest.raises(CatalogError, match="not in this doctor's release table"):
        resolve_plan(Host.for_test(tmp_path), FetchRequest(version="2.14.0", variant="cpu"))
    plan = resolve_plan(Host.for_test(tmp_path), FetchRequest(version="2.14.0", variant="cpu", unlisted=True))
    assert plan.file_name == "libtorch-shared-with-deps-2.14.0+cpu.zip" and not plan.listed


def test_a_musl_machine_gets_no_plan_of_its_own(tmp_path):
    """No libtorch runs on musl (Alpine): refused, unless --platform names the machine it is for."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/ld-musl-x86_64.so.1").write_bytes(b"")
    host = host_with_torch(tmp_path, None, glibc=None)
    with pytest.raises(UsageError, match="this machine's C library is musl: libtorch is built for glibc only") as err:
        resolve_plan(host, FetchRequest(variant="cpu"))
    assert "python:3.x-slim" in err.value.hint and "--platform" in err.value.hint
    plan = resolve_plan(host, FetchRequest(variant="cpu", platform="linux-x86_64"))
    assert plan.platform == "linux-x86_64"


def test_without_home_the_default_destination_is_the_users_home_never_a_folder_named_tilde(tmp_path, monkeypatch):
    """cron, systemd units and `env -i` run without HOME: the destination was `~/.cache/libtorch/…`
    relative to the current folder, a folder literally named `~` (and `rm -rf ~` is how people
    remove one). The user database answers instead; where it cannot either, fetch refuses."""
    import os
    import pwd

    host = Host(env={"PATH": os.environ["PATH"]}, cwd=tmp_path, sys_path=[])
    plan = resolve_plan(host, FetchRequest(variant="cpu", version="2.13.0"))
    assert plan.dest == Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache/libtorch/2.13.0/linux-x86_64/cpu"

    def nobody_knows(uid):
        raise KeyError(uid)  # a container's random uid, absent from /etc/passwd

    monkeypatch.setattr(pwd, "getpwuid", nobody_knows)
    with pytest.raises(UsageError, match="no home folder to install under: HOME is unset") as err:
        resolve_plan(host, FetchRequest(variant="cpu", version="2.13.0"))
    assert "--dest" in err.value.hint and "LIBTORCH_HOME" in err.value.hint
    given = Host(env={"PATH": os.environ["PATH"], "LIBTORCH_HOME": str(tmp_path / "lt")}, cwd=tmp_path, sys_path=[])
    assert resolve_plan(given, FetchRequest(variant="cpu", version="2.13.0")).dest == tmp_path / "lt/2.13.0/linux-x86_64/cpu"
    assert not (tmp_path / "~").exists()
