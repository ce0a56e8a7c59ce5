"""One report with every kind of finding, and helpers to run the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.model import Area, Evidence, Finding, Level, Report

REPO = Path(__file__).resolve().parents[2]

# Text that breaks naive renderers: workflow-command separators, markdown table pipes,
# HTML-looking include names, a percent sign, newlines and a control character from a log.
ERROR = Finding(
    id="abi.mismatch",
    level=Level.ERROR,
    title="CXX11 ABI mismatch: libtorch uses cxx11, CXXFLAGS say 0",
    detail="libtorch at /opt/libtorch, 100% sure\nyour flags: -D_GLIBCXX_USE_CXX11_ABI=0 | from <CXXFLAGS>",
    fix="export CXXFLAGS='-D_GLIBCXX_USE_CXX11_ABI=1' && make | tee `build.log` *",
    area="libtorch",
    evidence=[
        Evidence("file", "/opt/libtorch/share/cmake/Torch/TorchConfig.cmake", 'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")'),
        Evidence("log", "build.log:12", "undefined reference to `c10::Device::Device(std::string const&)'\x07"),
    ],
    subject="/opt/libtorch",
)
WARNING = Finding(
    id="cxx.std-too-old",
    level=Level.WARNING,
    title="g++ 9 accepts at most -std=c++17, libtorch needs c++20",
    detail="#include <torch/torch.h> will fail",
    fix="apt install g++-12",
    area="toolchain",
    evidence=[Evidence("command", "g++ -std=c++20 -x c++ -", "error: unrecognized command-line option")],
)
INFO = Finding(id="libtorch.found", level=Level.INFO, title="libtorch 2.13.0+cpu", area="libtorch")


def sample_report(strict: bool = False) -> Report:
    return Report(
        command="check",
        facts={"note": "facts are not rendered by these formats"},
        areas=[
            Area("system", "System", "Linux 6.1, x86_64, glibc 2.36", details=["cores: 2"]),
            Area("libtorch", "libtorch", "2.13.0+cpu at /opt/libtorch", findings=[ERROR, INFO]),
            Area("toolchain", "Toolchain", "g++ 9.4.0", findings=[WARNING]),
        ],
        doctor_version="0.1.0",
        strict=strict,
    )


@pytest.fixture
def report() -> Report:
    return sample_report()


def doctor_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment for `python -m doctor` that sees this checkout and no CI of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "LIBTORCH", "CI"))}
    env.update(PYTHONPATH=str(REPO), HOME=str(tmp_path / "home"), NO_COLOR="1")
    env.update(extra)
    return env


def run_doctor(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "doctor", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def wheel_libtorch() -> Path:
    """The torch wheel's libtorch tree (lib/, include/, share/), found without importing torch."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin, "the torch 2.13.0 wheel must be installed for these tests"
    return Path(spec.origin).parent


@pytest.fixture(scope="session")
def libtorch_zip(tmp_path_factory) -> Path:
    """A small libtorch 2.13.0+cpu zip laid out like the official one (top folder `libtorch/`):
    the wheel's real libc10.so and CMake files, one header, build-version. Half a megabyte."""
    import zipfile

    wheel = wheel_libtorch()
    path = tmp_path_factory.mktemp("archive") / "libtorch-shared-with-deps-2.13.0+cpu.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(wheel / "lib/libc10.so", "libtorch/lib/libc10.so")
        for cmake in sorted((wheel / "share/cmake/Torch").glob("TorchConfig*.cmake")):
            zf.write(cmake, f"libtorch/share/cmake/Torch/{cmake.name}")
        zf.writestr("libtorch/include/torch/script.h", "#pragma once\n")
        zf.writestr("libtorch/build-version", "2.13.0+cpu\n")
    return path


def fetch_into(home: Path, archive: Path, cwd: Path, libtorch_home: Path | None = None) -> Path:
    """What an earlier CI run left in the cache: `doctor fetch-libtorch` from the archive, for real."""
    cwd.mkdir(parents=True, exist_ok=True)
    libtorch_home = libtorch_home or home / ".cache/libtorch"
    result = run_doctor(["fetch-libtorch", "--version", "2.13.0", "--variant", "cpu", "--archive", str(archive),
                         "--no-lock", "-q"], cwd=cwd,
                        env=doctor_env(home.parent, HOME=str(home), LIBTORCH_HOME=str(libtorch_home)))
    assert result.returncode == 0, result.stderr
    tree = libtorch_home / "2.13.0/linux-x86_64/cpu"
    assert (tree / "lib/libc10.so").is_file()
    return tree


def shim_bin(tmp_path: Path) -> Path:
    """`doctor` runs this checkout; `python -m pip install …` is recorded instead of installing."""
    import textwrap

    bin_dir = tmp_path / "shims"
    bin_dir.mkdir()
    (bin_dir / "doctor").write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m doctor "$@"\n')
    (bin_dir / "python").write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1 $2 $3" = "-m pip install" ]; then
          shift 3; echo "$*" >> "{bin_dir}/pip-installs"; exit 0
        fi
        exec "{sys.executable}" "$@"
        """))
    (bin_dir / "pip").write_text(f'#!/bin/sh\n[ "$1" = install ] || exit 9\nshift; echo "$*" >> "{bin_dir}/pip-installs"\n')
    # gh: records its arguments and keeps a copy of --body-file
    (bin_dir / "gh").write_text(textwrap.dedent(f"""\
        #!/bin/bash
        echo "$*" >> "{bin_dir}/gh-calls"
        while [ $# -gt 0 ]; do
          if [ "$1" = --body-file ]; then cp "$2" "{bin_dir}/gh-body"; fi
          shift
        done
        """))
    for shim in bin_dir.iterdir():
        shim.chmod(0o755)
    return bin_dir


C10_SOURCE = """
#include <string>
namespace c10 {
struct Device { explicit Device(const std::string& s); int index; };
Device::Device(const std::string& s) : index(static_cast<int>(s.size())) {}
std::string device_name(const std::string& s) { return s + ":0"; }
}
"""


@pytest.fixture(scope="session")
def old_abi_tree(tmp_path_factory) -> Path:
    """A libtorch 2.6.0+cpu tree as an old-ABI zip unpacks: TorchConfig.cmake with ABI=0 and a real
    libc10.so compiled with -D_GLIBCXX_USE_CXX11_ABI=0 (a tiny one: the symbols decide the ABI)."""
    root = tmp_path_factory.mktemp("libtorch-2.6.0-pre-cxx11")
    (root / "lib").mkdir()
    (root / "include/torch").mkdir(parents=True)
    (root / "share/cmake/Torch").mkdir(parents=True)
    source = root / "c10.cpp"
    source.write_text(C10_SOURCE)
    subprocess.run(["g++", "-shared", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=0", "-o", str(root / "lib/libc10.so"), str(source)],
                   check=True, timeout=60)
    source.unlink()
    (root / "build-version").write_text("2.6.0+cpu\n")
    (root / "share/cmake/Torch/TorchConfig.cmake").write_text('set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\n')
    (root / "share/cmake/Torch/TorchConfigVersion.cmake").write_text('set(PACKAGE_VERSION "2.6.0")\n')
    return root


def runner_env(tmp_path: Path, home: Path, shims: Path, **extra: str) -> dict[str, str]:
    """A CI job's environment: our shims first on PATH, a fresh HOME, nothing of this machine's CI."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "LIBTORCH", "CI", "RUNNER_"))}
    env.update(HOME=str(home), PATH=f"{shims}{os.pathsep}{os.environ['PATH']}", NO_COLOR="1")
    env.update(extra)
    return env


# A `Build` step is the user's own; tests run this instead: the environment it would see is set.
BUILD_CHECK = """\
test -n "$LIBTORCH" && test -f "$LIBTORCH/lib/libc10.so"
case ":$LD_LIBRARY_PATH:" in *":$LIBTORCH/lib:"*) ;; *) echo "LD_LIBRARY_PATH lacks $LIBTORCH/lib" >&2; exit 1 ;; esac
echo "build would use $LIBTORCH"
"""
