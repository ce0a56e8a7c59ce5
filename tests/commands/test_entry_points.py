"""The console scripts pyproject.toml declares start the doctor and pass its exit codes on
(doctor.cli.run: main(), then exit without the last garbage collection)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def run_script(target: str, *args: str, env: dict | None = None, cwd: Path) -> subprocess.CompletedProcess:
    """What the installed console script does: import the target and call it."""
    module, func = target.split(":")
    code = f"import sys; sys.argv = ['doctor', *sys.argv[1:]]; from {module} import {func}; {func}()"
    full = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "DOCTOR_"))}
    full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
    full["XDG_CACHE_HOME"] = str(cwd / "cache")
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, cwd=cwd,
                          timeout=120)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_console_scripts_start_and_keep_the_exit_codes(name, tmp_path):
    target = SCRIPTS[name]
    ok = run_script(target, "--version", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("torch-doctor, version "), ok.stderr
    assert run_script(target, "no-such-command", cwd=tmp_path).returncode == 2
    crash = run_script(target, "check", env={"DOCTOR_DEBUG_CRASH": "1"}, cwd=tmp_path)
    assert crash.returncode == 3 and "crashed (a bug, not your setup)" in crash.stderr
    assert len(list((tmp_path / "cache" / "torch-doctor" / "crashes").iterdir())) == 1  # written before the exit
