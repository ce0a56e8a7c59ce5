"""`import torch` failing because the torch/ Python took has no `_C` for it, made for real: the
torch 2.13 wheel of this machine, linked file by file into a PyTorch-checkout-like folder (no
compiled extension) and into a real venv whose `_C` is named for another Python. The real
interpreter raises torch's own error; `doctor explain` reads that output, `doctor check` the
machine, and both name the same cause."""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.diagnose.cuda_stack import pyenv_area
from doctor.explain import explain_text
from doctor.host import Host
from doctor.probe.pyenv import detect_pyenv, interpreter_host

THIS_PYTHON = importlib.machinery.EXTENSION_SUFFIXES[0]  # ".cpython-311-x86_64-linux-gnu.so"
OTHER_PYTHON = ".cpython-39-x86_64-linux-gnu.so"


def torch_linked(into: Path, wheel_root: Path, extension: str | None) -> Path:
    """`into`/torch: every entry of the wheel's torch/ as a symbolic link, its `_C` extension
    renamed to `extension` (None: left out, as in a source checkout)."""
    package = into / "torch"
    package.mkdir(parents=True)
    for entry in wheel_root.iterdir():
        if entry.name == "_C" + THIS_PYTHON:
            if extension is not None:
                (package / ("_C" + extension)).symlink_to(entry)
        else:
            (package / entry.name).symlink_to(entry)
    return package


def import_torch(python: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    run = subprocess.run([python, "-c", "import torch"], cwd=cwd, capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    assert run.returncode != 0, "the import was meant to fail"
    assert "Failed to load PyTorch C extensions" in run.stderr  # torch's own words, from its own __init__.py
    return run.stderr


@pytest.fixture(scope="module")
def other_python_venv(tmp_path_factory, wheel_root: Path) -> Path:
    """A venv (the system site-packages behind it, for torch's own dependencies) whose torch is
    the wheel's with `_C` built, by its name, for another Python: a venv copied across versions."""
    root = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    torch_linked(site, wheel_root, OTHER_PYTHON)
    info = next(wheel_root.parent.glob("torch-*.dist-info"))
    (site / info.name).symlink_to(info)
    return root


def test_a_checkout_in_the_current_folder_is_named_by_explain(tmp_path, wheel_root):
    checkout = tmp_path / "pytorch"
    torch_linked(checkout, wheel_root, None)
    log = import_torch(sys.executable, checkout)
    (finding,) = explain_text(log)
    assert finding.id == "python.torch-shadowed"
    assert finding.title == f"`import torch` took {checkout / 'torch'}, not an installed torch"
    assert f"start Python from another folder than {checkout}" in finding.fix
    assert f"not in a site-packages folder ({checkout / 'torch'})" in finding.detail


def test_an_installed_torch_without_this_pythons_extension_check_and_explain_agree(other_python_venv):
    python = str(other_python_venv / "bin/python")
    log = import_torch(python, other_python_venv)
    package = next(other_python_venv.glob("lib/python3*/site-packages")) / "torch"
    (finding,) = explain_text(log)
    assert finding.id == "python.torch-extension-missing"
    assert finding.title == f"the installed torch in {package} has no `_C` extension this Python can load"
    assert "python -m pip install --force-reinstall --no-deps" in finding.fix
    # check, on the same venv: the files tell the same
    facts = detect_pyenv(interpreter_host(Host.from_system(), python))
    assert facts.torch_extension_loadable is False
    assert facts.torch_extensions == ["_C" + OTHER_PYTHON]
    (checked,) = [f for f in pyenv_area(facts).findings if f.id == "python.torch-extension-missing"]
    assert f"has no _C extension for CPython {facts.version} (it holds _C{OTHER_PYTHON}: built for another Python)" \
        in checked.title
    assert f"{python} -m pip install --force-reinstall --no-deps torch==2.13.0" in checked.fix


def test_this_interpreters_torch_loads_its_extension():
    facts = detect_pyenv(Host.from_system())
    assert facts.torch_extension_loadable is True
    assert "_C" + THIS_PYTHON in facts.torch_extensions
    assert not [f for f in pyenv_area(facts).findings if f.id == "python.torch-extension-missing"]


def test_without_the_traceback_the_pair_stays_open_and_says_so():
    (finding,) = explain_text("ImportError: Failed to load PyTorch C extensions:\n"
                              "    It appears that PyTorch has loaded the `torch/_C` folder\n")
    assert finding.id == "python.torch-shadowed"
    assert "no traceback frame of torch/__init__.py" in finding.detail


@pytest.mark.parametrize("frame, expected", [
    (r'  File "C:\Users\u\venv\lib\site-packages\torch\__init__.py", line 209, in <module>',
     "python.torch-extension-missing"),
    ('  File "/usr/lib/python3/dist-packages/torch/__init__.py", line 81, in <module>', "python.torch-extension-missing"),
    (r'  File "D:\Gaurav\pytorch-master\torch\__init__.py", line 81, in <module>', "python.torch-shadowed"),
])
def test_the_frame_before_the_error_decides(frame, expected):
    # an earlier traceback through another torch/ does not decide
    other = '  File "/home/u/pytorch/torch/__init__.py", line 5, in <module>' \
        if expected != "python.torch-shadowed" else '  File "/opt/venv/lib/site-packages/torch/__init__.py", line 5'
    log = "\n".join([other, "ValueError: something else", "Traceback (most recent call last):", frame,
                     "    from torch._C import *", "ModuleNotFoundError: No module named 'torch._C'"])
    (finding,) = explain_text(log)
    assert finding.id == expected


def test_other_packages_c_extensions_are_not_torch():
    for line in ("ModuleNotFoundError: No module named 'torchvision._C'", "No module named 'detectron2._C'",
                 "ModuleNotFoundError: No module named 'torch._C._dynamo'"):
        assert explain_text(line) == []


def test_a_hostile_frame_is_clipped_in_the_title():
    long = "/x" * 1500
    (finding,) = explain_text(f'  File "{long}/torch/__init__.py", line 1\nImportError: Failed to load PyTorch C extensions:')
    assert len(finding.title) < 400


def test_pip_s_isolated_build_has_no_torch_and_the_fix_builds(tmp_path):
    """A package whose build imports torch (as flash-attn's setup.py does), built by the real pip:
    in its isolated environment torch is missing; built without isolation, it builds."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                            'backend-path = ["."]\n')
    (package / "backend.py").write_text("import torch  # noqa: F401\nfrom setuptools.build_meta import *  # noqa\n")
    (package / "setup.py").write_text('from setuptools import setup\nsetup(name="needs-torch", version="0", py_modules=[])\n')
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "-w", str(tmp_path / "out")]
    isolated = subprocess.run([*pip, str(package)], capture_output=True, text=True, timeout=300)
    assert isolated.returncode != 0 and "No module named 'torch'" in isolated.stdout + isolated.stderr
    (finding,) = explain_text(isolated.stdout + isolated.stderr)
    assert (finding.id, finding.title) == ("python.torch-missing",
                                           "the package was built in an isolated environment, which has no torch")
    assert finding.fix.startswith("install torch first, then build the package against it: pip install "
                                  "--no-build-isolation <package>")
    built = subprocess.run([*pip, "--no-build-isolation", str(package)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]  # and the fix works


def test_an_interpreter_without_torch(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    run = subprocess.run([str(venv / "bin/python"), "-c", "import torch"], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    assert run.returncode != 0 and "No module named 'torch'" in run.stderr
    (finding,) = explain_text(run.stderr)
    assert (finding.id, finding.title) == ("python.torch-missing", "the Python that ran this has no torch")
    assert "doctor check --python <that python>" in finding.fix
