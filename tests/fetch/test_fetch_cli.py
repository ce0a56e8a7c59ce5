"""The command line: the plan printed by --dry-run, exit codes as a user sees them, and the
get-deps.sh front."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from testsupport.fetch_helpers import REPO, doctor_env, libtorch_zip, run_doctor

GET_DEPS = REPO / "scripts/get-deps.sh"


def test_dry_run_prints_url_file_abi_and_destination(tmp_path):
    r = run_doctor("fetch-libtorch", "--dry-run", "--version", "2.6.0", "--variant", "cu124", "--abi", "pre-cxx11",
                   cwd=tmp_path, env=doctor_env(LIBTORCH_HOME="/opt/lt"))
    assert r.returncode == 0, r.stderr
    assert "https://download.pytorch.org/libtorch/cu124/libtorch-shared-with-deps-2.6.0%2Bcu124.zip" in r.stdout
    assert "file      libtorch-shared-with-deps-2.6.0+cu124.zip" in r.stdout
    assert "ABI       pre-cxx11" in r.stdout
    assert "dest      /opt/lt/2.6.0/linux-x86_64/cu124-pre-cxx11" in r.stdout
    assert not list(tmp_path.iterdir())  # nothing written, not even the lock


def test_a_quoted_tilde_means_home_not_a_folder_named_tilde(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(), work.mkdir()
    z = libtorch_zip(home / "libtorch.zip")
    r = run_doctor("fetch-libtorch", "--archive", "~/libtorch.zip", "--version", "2.13.0", "--variant", "cpu",
                   "--dest", "~/lt", "--lock", "~/libtorch.lock", cwd=work, env=doctor_env(HOME=str(home)))
    assert r.returncode == 0, r.stderr
    assert (home / "lt" / "lib").is_dir() and (home / "libtorch.lock").is_file() and z.is_file()
    assert not list(work.iterdir())  # no ./~ made beside the user


def test_dry_run_json(tmp_path):
    r = run_doctor("fetch-libtorch", "--dry-run", "--json", "--version", "2.13.0", "--variant", "cpu",
                   "--platform", "macos-arm64", cwd=tmp_path)
    plan = json.loads(r.stdout)["plan"]
    assert plan["url"] == "https://download.pytorch.org/libtorch/cpu/libtorch-macos-arm64-2.13.0.zip"
    assert plan["abi"] is None and plan["platform"] == "macos-arm64"


def test_get_deps_c_uses_hasktorchs_ci_mirror_like_the_original(tmp_path):
    r = get_deps("-c", "--", "--dry-run", env={"LIBTORCH_HOME": "/c"}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert ("https://github.com/hasktorch/libtorch-binary-for-ci/releases/download/2.9.1/"
            "cpu-libtorch-shared-with-deps-latest.zip") in r.stdout and "/c/2.9.1/linux-x86_64/cpu" in r.stdout
    r = get_deps("-c", "-a", "cu128", "--", "--dry-run", env={"LIBTORCH_VERSION": "2.8.0"}, cwd=tmp_path)
    assert r.returncode == 0 and "/2.8.0/cu128-libtorch-shared-with-deps-latest.zip" in r.stdout, r.stderr
    r = get_deps("-n", "-c", "-a", "cpu", "--", "--dry-run", cwd=tmp_path)  # -n wins, as in Hasktorch's script
    assert "libtorch/nightly/cpu/libtorch-shared-with-deps-latest.zip" in r.stdout


@pytest.mark.parametrize("argv, code, message", [
    (["--version", "2.99.0", "--variant", "cpu"], 2, "not in this doctor's release table; known: 1.13.x (0, 1)"),
    (["--version", "2.13.0", "--variant", "cu118"], 2, "published: cpu, cu126, cu130, cu132, rocm7.1, rocm7.2"),
    (["--version", "2.8.0", "--variant", "cpu", "--abi", "pre-cxx11"], 2, "CXX11 ABI only"),
    (["--version", "2.13.0", "--variant", "gpu"], 2, "not a libtorch variant"),
    (["--platform", "solaris-sparc"], 2, "Invalid value for '--platform'"),
    (["--url", "http://example.com/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"], 2, "refusing plain HTTP"),
    (["--no-lock", "--lock", "x.lock"], 2, "--no-lock does not combine"),
])
def test_usage_errors_exit_2_with_one_clear_line(tmp_path, argv, code, message):
    r = run_doctor("fetch-libtorch", "--dry-run", *argv, cwd=tmp_path)
    assert r.returncode == code, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("argv, env", [
    (["--url", "https://download..pytorch.org/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"], {}),
    (["--mirror", "https://download..pytorch.org/libtorch"], {}),
    ([], {"DOCTOR_LIBTORCH_MIRROR": "https://download..pytorch.org/libtorch"}),
])
def test_a_host_name_with_an_empty_label_is_a_usage_error_not_a_crash(tmp_path, argv, env):
    r = run_doctor("fetch-libtorch", "--version", "2.13.0", "--variant", "cpu", "--no-lock", "--dest",
                   str(tmp_path / "d"), *argv, cwd=tmp_path, env=doctor_env(HOME=str(tmp_path), **env))
    assert r.returncode == 2, r.stderr
    assert "'download..pytorch.org' has an empty label" in r.stderr and "hint:" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "d").exists()


def test_a_malformed_answer_exits_1_with_a_hint(server, tmp_path):
    server.script("/libtorch-shared-with-deps-2.13.0+cpu.zip", [("raw", 302, [("Location", "http://[::1")], b"")])
    r = run_doctor("fetch-libtorch", "--url", server.url("/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"),
                   "--allow-http", "--dest", str(tmp_path / "d"), "--no-lock", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-2].startswith("error: 127.0.0.1 answered with a redirect to a URL that does not parse")
    assert r.stderr.splitlines()[-1].startswith("hint: ")


@pytest.mark.parametrize("kind", ["fifo", "device", "dangling"])
def test_an_archive_that_is_not_a_file_is_named_for_what_it_is(tmp_path, kind):
    """It was "no such file" for a named pipe, a device or a dangling link alike."""
    path = tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "gone.zip")
    else:
        path = "/dev/null"
    r = run_doctor("fetch-libtorch", "--archive", str(path), "--version", "2.13.0", "--variant", "cpu", "--no-lock",
                   "--dest", str(tmp_path / "d"), cwd=tmp_path, timeout=30)
    said = {"fifo": "is a named pipe, not a zip file", "device": "is a device, not a zip file",
            "dangling": "is a symbolic link to a path that does not exist"}[kind]
    assert r.returncode == 2 and f"error: --archive {path}: {said}" in r.stderr and "hint: " in r.stderr, r.stderr


def test_download_failure_exits_1(server, tmp_path):
    r = run_doctor("fetch-libtorch", "--url", server.url("/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"),
                   "--allow-http", "--dest", str(tmp_path / "d"), "--no-lock", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines()[-2].startswith("error: not found (HTTP 404)")


def test_help_names_the_sources_and_checks(tmp_path):
    r = run_doctor("fetch-libtorch", "--help", cwd=tmp_path)
    for option in ("--from-wheel", "--mirror", "--sha256", "--lock", "--dry-run", "--allow-http", "--unlisted"):
        assert option in r.stdout
    assert "--backoff" not in r.stdout  # a test knob, hidden


# -- get-deps.sh --


def get_deps(*argv, env=None, cwd=None):
    base = doctor_env(DOCTOR=f"{sys.executable} -m doctor")
    base.update(env or {})
    return subprocess.run(["bash", str(GET_DEPS), *argv], capture_output=True, text=True, env=base, cwd=cwd,
                          timeout=120)


def test_get_deps_is_shellcheck_clean():
    r = subprocess.run(["shellcheck", str(GET_DEPS)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_get_deps_help_and_flags(tmp_path):
    r = get_deps("-h")
    assert r.returncode == 0 and "-a ARCH" in r.stdout and all(f"  -{o} " in r.stdout for o in "ncsh")
    r = get_deps("-a", "cu130", "--", "--dry-run", "--version", "2.13.0", env={"LIBTORCH_HOME": "/c"}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "/cu130/libtorch-shared-with-deps-2.13.0%2Bcu130.zip" in r.stdout and "/c/2.13.0/linux-x86_64/cu130" in r.stdout
    r = get_deps("-n", "-a", "cpu", "--", "--dry-run", cwd=tmp_path)
    assert "libtorch/nightly/cpu/libtorch-shared-with-deps-latest.zip" in r.stdout
    r = get_deps("--", "--dry-run", env={"LIBTORCH_VERSION": "2.5.1", "LIBTORCH_CUDA_VERSION": "cu124"}, cwd=tmp_path)
    assert "libtorch-cxx11-abi-shared-with-deps-2.5.1%2Bcu124.zip" in r.stdout


@pytest.mark.parametrize("argv, code, message", [
    (["-x"], 2, "unknown option -x"),
    (["-c", "-a", "rocm6.4"], 2, "Hasktorch's CI mirror has cpu and cuXYZ builds"),
    (["-a"], 2, "option -a needs a value"),
    (["-a", "--", "--dry-run"], 2, "option -a needs a value"),
    (["-a", "cuda11"], 2, "'cuda11' is not a libtorch variant"),
])
def test_get_deps_fails_loudly(tmp_path, argv, code, message):
    r = get_deps(*argv, cwd=tmp_path)
    assert r.returncode == code and message in r.stderr


def test_get_deps_skip_download_needs_an_install(server, tmp_path):
    r = get_deps("-s", "-a", "cpu", "--", "--version", "2.13.0", "--dest", str(tmp_path / "d"), "--no-lock", cwd=tmp_path)
    assert r.returncode == 1 and "--offline forbids downloading" in r.stderr
    server.add("/cpu/libtorch-shared-with-deps-2.13.0+cpu.zip", libtorch_zip(tmp_path / "z.zip").read_bytes())
    common = ["--version", "2.13.0", "--dest", str(tmp_path / "d"), "--no-lock", "--mirror", server.base, "--allow-http"]
    assert get_deps("-a", "cpu", "--", *common, cwd=tmp_path).returncode == 0
    r = get_deps("-s", "-a", "cpu", "--", *common, cwd=tmp_path)
    assert r.returncode == 0 and "already installed" in r.stdout


def test_get_deps_without_doctor_exits_non_zero(tmp_path):
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no doctor, no python
    r = subprocess.run(["/bin/bash", str(GET_DEPS), "-a", "cpu"], capture_output=True, text=True, env=env)
    assert r.returncode == 127 and "torch-doctor is not installed" in r.stderr
    r = get_deps("-a", "cpu", env={"DOCTOR": "no-such-doctor"})
    assert r.returncode == 127 and "no-such-doctor: command not found" in r.stderr
    assert os.access(GET_DEPS, os.X_OK)
