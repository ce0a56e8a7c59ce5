"""Real client builds against the torch 2.13.0 wheel's libtorch, each with only what `doctor emit`
wrote: a dependency-free Cargo crate (build.rs compiles a C++ shim with the compiler on PATH), a
base-only cabal package with a C++ shim through the FFI, and the PyTorch docs' CMake example-app.
Each runs and prints a c10 device name; then one broken variant each (the other ABI, a missing
rpath) fails, and `doctor explain` on the captured log names that failure.

Build folders live in one session temp dir so a second build in the session is incremental.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from testsupport.support import doctor_subprocess

HERE = Path(__file__).parent
pytestmark = pytest.mark.slow


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is needed for this test: run scripts/test (it installs the client toolchains)")
    return path


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No user rc files or caches (HOME is a temp dir), no LIBTORCH* leaking in."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def builds(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("client-builds")


def copy_app(name: str, dest: Path) -> Path:
    if not dest.exists():
        shutil.copytree(HERE / name, dest)
    return dest


def explain_ids(log: str, tmp_path: Path) -> list[str]:
    path = tmp_path / "build.log"
    path.write_text(log)
    got = doctor_subprocess("explain", str(path), "--json", "--no-facts")
    assert got.returncode in (0, 1), got.stderr
    return [f["id"] for f in json.loads(got.stdout)["findings"]]


def rust_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A clean environment in which rustup's cargo proxy still finds its toolchains."""
    cargo = Path(need("cargo")).resolve()
    env = clean_env(tmp_path, **extra)
    for var, guess in (("CARGO_HOME", cargo.parent.parent), ("RUSTUP_HOME", cargo.parent.parent.parent / ".rustup")):
        value = os.environ.get(var) or (str(guess) if guess.is_dir() else None)
        if value:
            env[var] = value
    env["PATH"] = f"{cargo.parent}:{env['PATH']}"
    return env


def test_cargo_crate_builds_and_runs_with_only_emit_cargo(builds, wheel_root, tmp_path):
    app = copy_app("cargo-app", builds / "cargo-app")
    (app / ".cargo").mkdir(exist_ok=True)
    got = doctor_subprocess("emit", "cargo", "--libtorch", str(wheel_root), "-o", str(app / ".cargo/config.toml"))
    assert got.returncode == 0, got.stderr
    env = rust_env(tmp_path)
    run = subprocess.run(["cargo", "run", "--offline", "-q"], cwd=app, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "c10 device: cpu"
    # the binary itself starts without LD_LIBRARY_PATH: the rpath from [build] rustflags
    env.pop("LD_LIBRARY_PATH", None)
    alone = subprocess.run([str(app / "target/debug/c10name")], env=env, capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0 and alone.stdout.strip() == "c10 device: cpu", alone.stderr

    # A tch-rs user's LIBTORCH_CXX11_ABI=0 against this cxx11 tree: the link fails, explain says abi.mismatch.
    bad = subprocess.run(["cargo", "build", "--offline"], cwd=app, env=rust_env(tmp_path, LIBTORCH_CXX11_ABI="0"),
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0
    assert "undefined symbol: c10::Device::str() const" in bad.stderr  # rust-lld: the old-ABI name
    assert "abi.mismatch" in explain_ids(bad.stderr, tmp_path)
    # the target/ folder, built against the wheel, is stale once LIBTORCH names another tree
    assert stale_ids(app, tmp_path, wheel_root) == ["build.stale-variant"]


def stale_ids(app: Path, tmp_path: Path, wheel_root: Path) -> list[str]:
    """`doctor check` in the built project with LIBTORCH naming another tree (a copy of libc10)."""
    other = tmp_path / "other-libtorch"
    (other / "lib").mkdir(parents=True, exist_ok=True)
    (other / "include/torch").mkdir(parents=True, exist_ok=True)
    shutil.copy(wheel_root / "lib/libc10.so", other / "lib/libc10.so")
    got = doctor_subprocess("check", "--json", cwd=app, env={"LIBTORCH": str(other)})
    return [f["id"] for f in json.loads(got.stdout)["findings"] if f["id"] == "build.stale-variant"]


def cabal_env(tmp_path: Path) -> dict[str, str]:
    # No package index and no network: base ships with GHC; the config names no repository.
    config = tmp_path / "cabal-config"
    config.write_text("-- no repositories: offline\n")
    return clean_env(tmp_path, CABAL_CONFIG=str(config), CABAL_DIR=str(tmp_path / "cabal"))


def cabal_build(app: Path, tmp_path: Path) -> str:
    """`cabal build` of the app, offline; the path of its executable."""
    env = cabal_env(tmp_path)
    build = subprocess.run(["cabal", "build", "--offline"], cwd=app, env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    return subprocess.run(["cabal", "list-bin", "--offline", "c10name"], cwd=app, env=env, capture_output=True, text=True,
                          timeout=120).stdout.strip().splitlines()[-1]


def test_cabal_package_builds_and_runs_with_only_emit_cabal(builds, wheel_root, tmp_path):
    need("ghc")
    need("cabal")
    app = copy_app("cabal-app", builds / "cabal-app")
    got = doctor_subprocess("emit", "cabal", "--libtorch", str(wheel_root), "-o", str(app / "cabal.project.local"))
    assert got.returncode == 0, got.stderr
    exe = cabal_build(app, tmp_path)
    run = subprocess.run([exe], env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "c10 device: cpu", run.stderr
    assert stale_ids(app, tmp_path, wheel_root) == ["build.stale-variant"]  # dist-newstyle's setup-config

    # Without the rpath line the executable cannot start; explain names the loader.
    local = app / "cabal.project.local"
    local.write_text("".join(line for line in local.read_text().splitlines(True) if "ghc-options" not in line))
    run = subprocess.run([cabal_build(app, tmp_path)], env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "libc10.so" in run.stderr
    assert "loader.library-not-found" in explain_ids(run.stderr, tmp_path)


def test_stack_build_against_another_libtorch_is_stale(builds, wheel_root, tmp_path):
    """The same package built by stack (its system GHC, no download): .stack-work records the lib dir
    in a Cabal setup-config; once LIBTORCH names another tree, check says that build is stale."""
    ghc = need("ghc")
    need("stack")
    app = copy_app("cabal-app", builds / "stack-app")
    version = subprocess.run([ghc, "--numeric-version"], capture_output=True, text=True, check=True).stdout.strip()
    include, lib = wheel_root / "include", wheel_root / "lib"
    (app / "stack.yaml").write_text(
        f"resolver: ghc-{version}\nsystem-ghc: true\ninstall-ghc: false\npackages: [.]\n"
        f"extra-include-dirs: [{include}, {include}/torch/csrc/api/include]\nextra-lib-dirs: [{lib}]\n")
    env = clean_env(tmp_path, STACK_ROOT=str(tmp_path / "stack-root"))
    build = subprocess.run(["stack", "build"], cwd=app, env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    run = subprocess.run(["stack", "exec", "--", "c10name"], cwd=app, env={**env, "LD_LIBRARY_PATH": str(lib)},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "c10 device: cpu", run.stderr
    assert stale_ids(app, tmp_path, wheel_root) == ["build.stale-variant"]
    got = doctor_subprocess("check", "--json", cwd=app, env={"LIBTORCH": str(tmp_path / "other-libtorch")})
    stale = next(f for f in json.loads(got.stdout)["findings"] if f["id"] == "build.stale-variant")
    assert stale["subject"] == str(app / ".stack-work") and stale["fix"] == "stack clean"
    assert "/setup-config" in stale["detail"] and str(lib) in stale["title"]


def test_cmake_example_app_with_only_emit_cmake(builds, wheel_root, tmp_path):
    need("cmake")
    app = copy_app("cmake-app", builds / "cmake-app")
    got = doctor_subprocess("emit", "cmake", "--libtorch", str(wheel_root), "-o", str(app / "CMakeUserPresets.json"))
    assert got.returncode == 0, got.stderr
    env = clean_env(tmp_path)
    for argv in (["cmake", "--preset", "libtorch"], ["cmake", "--build", "--preset", "libtorch"]):
        step = subprocess.run(argv, cwd=app, env=env, capture_output=True, text=True, timeout=600)
        assert step.returncode == 0, step.stdout + step.stderr
    run = subprocess.run([str(app / "build/example-app")], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "c10 device: cpu" in run.stdout and "CPUFloatType{2,3}" in run.stdout, run.stderr

    # The same program installed without its build-tree rpath: explain names the loader.
    bare = app / "build/example-app-norpath"
    shutil.copy(app / "build/example-app", bare)
    subprocess.run([need("patchelf"), "--remove-rpath", str(bare)], check=True)
    run = subprocess.run([str(bare)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "cannot open shared object file" in run.stderr
    assert "loader.library-not-found" in explain_ids(run.stderr, tmp_path)


def tree_in_a_comma_folder(tmp_path: Path, wheel_root: Path) -> Path:
    """A libtorch tree (the wheel's libc10.so copied, its headers linked) under a folder whose name
    holds a comma: `-Wl,-rpath,<lib>` split there (cc splits -Wl at commas) and the link failed."""
    root = tmp_path / "comma,dir" / "libtorch"
    (root / "lib").mkdir(parents=True)
    shutil.copy(wheel_root / "lib/libc10.so", root / "lib/libc10.so")
    (root / "include").symlink_to(wheel_root / "include", target_is_directory=True)
    return root


def starts_alone(exe: Path, root: Path, tmp_path: Path) -> None:
    """`exe` runs with no LD_LIBRARY_PATH and finds libc10 through its RUNPATH: the folder exactly."""
    dynamic = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True, check=True).stdout
    assert f"{root}/lib" in next(line for line in dynamic.splitlines() if "Library runpath" in line).split("[", 1)[1]
    run = subprocess.run([str(exe)], env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "c10 device: cpu", run.stderr


def test_cargo_crate_links_a_tree_in_a_folder_named_with_a_comma(wheel_root, tmp_path):
    root = tree_in_a_comma_folder(tmp_path, wheel_root)
    app = copy_app("cargo-app", tmp_path / "cargo-app")
    (app / ".cargo").mkdir()
    got = doctor_subprocess("emit", "cargo", "--libtorch", str(root), "-o", str(app / ".cargo/config.toml"))
    assert got.returncode == 0, got.stderr
    build = subprocess.run(["cargo", "build", "--offline", "-q"], cwd=app, env=rust_env(tmp_path), capture_output=True,
                           text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    starts_alone(app / "target/debug/c10name", root, tmp_path)


def test_cabal_package_links_a_tree_in_a_folder_named_with_a_comma(wheel_root, tmp_path):
    need("ghc")
    need("cabal")
    root = tree_in_a_comma_folder(tmp_path, wheel_root)
    app = copy_app("cabal-app", tmp_path / "cabal-app")
    got = doctor_subprocess("emit", "cabal", "--libtorch", str(root), "-o", str(app / "cabal.project.local"))
    assert got.returncode == 0, got.stderr
    starts_alone(Path(cabal_build(app, tmp_path)), root, tmp_path)
