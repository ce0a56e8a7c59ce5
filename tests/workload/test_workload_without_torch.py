"""Without torch (or matplotlib), smoke and bench say how to get it and exit 2.

The Python here has torch, so these tests build a real one without it: `python -S` (no
site-packages) with a path holding the repository and links to every installed package
except the one to hide. Nothing is monkeypatched.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def python_without(tmp_path: Path, *hidden: str):
    lib = tmp_path / "site"
    lib.mkdir()
    for packages in site.getsitepackages():
        for entry in Path(packages).iterdir():
            name = entry.name.split("-")[0].split(".")[0].lower()
            if name in hidden or (lib / entry.name).exists() or entry.suffix == ".pth":
                continue
            (lib / entry.name).symlink_to(entry)

    def run(*args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(lib)])
        return subprocess.run([sys.executable, "-S", "-m", "doctor", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)

    return run


@pytest.mark.parametrize("command", [["smoke"], ["smoke", "--json"], ["bench", "--quick"]])
def test_without_torch_the_command_says_how_to_install_it(tmp_path, command):
    run = python_without(tmp_path, "torch", "torchgen", "functorch")
    assert "torch" not in os.listdir(tmp_path / "site")
    proc = run(*command)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"`doctor {command[0]}` needs torch, which is not installed" in proc.stderr
    assert "pip install 'torch-doctor[torch]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    if "--json" in command:  # machine output is the error envelope (docs/json-schema.md)
        error = json.loads(proc.stdout)["error"]
        assert error["id"] == "usage.missing-dependency" and "needs torch" in error["message"]
    else:
        assert proc.stdout == ""


def test_without_matplotlib_plot_says_which_extra(tmp_path):
    run = python_without(tmp_path, "matplotlib")
    proc = run("bench", "--quick", "--plot", str(tmp_path / "x.png"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs matplotlib" in proc.stderr and "pip install 'torch-doctor[plot]'" in proc.stderr
    assert not (tmp_path / "x.png").exists()
