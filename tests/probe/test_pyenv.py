"""The Python environment of this or another interpreter, read without importing torch: a real
venv made here with the real interpreter, and real dist-info directories in it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.diagnose.cuda_stack import pyenv_area
from doctor.errors import UsageError
from doctor.host import Host
from doctor.probe.pyenv import detect_pyenv, interpreter_host


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pyenv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    for name, version, installer in (("nvidia_nccl_cu12", "2.21.5", "pip"), ("torch", "2.6.0", "uv"),
                                     ("requests", "2.32.0", "pip")):
        d = site / f"{name}-{version}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n\n")
        (d / "INSTALLER").write_text(installer + "\n")
    return root


def test_another_interpreter_is_inspected(venv):
    base = Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin"}, sys_path=[])
    host = interpreter_host(base, str(venv / "bin/python"))
    assert host.python == str(venv / "bin/python") and any(p.endswith("site-packages") for p in host.sys_path)
    facts = detect_pyenv(host)
    assert facts.venv and facts.version == ".".join(map(str, sys.version_info[:3]))
    assert [(p.name, p.version, p.installer) for p in facts.packages] == [
        ("nvidia-nccl-cu12", "2.21.5", "pip"), ("torch", "2.6.0", "uv")]  # requests is not torch-family


def test_python_on_path_that_is_another_interpreter_warns(venv, tmp_path):
    host = interpreter_host(Host.for_test(Path("/"), {"PATH": str(Path(sys.executable).parent)}), str(venv / "bin/python"))
    area = pyenv_area(detect_pyenv(host))
    assert [f.id for f in area.findings] == ["python.path-differs"]
    assert f"--python {area.findings[0].subject}" in area.findings[0].fix
    # The venv's own bin/ first on PATH (an activated venv): no warning.
    host = interpreter_host(Host.for_test(Path("/"), {"PATH": str(venv / "bin")}), str(venv / "bin/python"))
    assert pyenv_area(detect_pyenv(host)).findings == []


STORE_ALIAS = ("#!/bin/sh\necho 'Python was not found; run without arguments to install from the Microsoft Store, or "
               "disable this shortcut from Settings > Manage App Execution Aliases.' >&2\nexit 49\n")  # 9009 on Windows


@pytest.mark.parametrize("body, says", [
    (STORE_ALIAS, "exited with status 49: Python was not found; run without arguments to install from the Microsoft"),
    ("#!/bin/sh\nexec /bin/sleep 30\n", "timed out after 0.5 s"),
    ("#!/bin/sh\necho hello\n", "did not answer like a Python interpreter"),
])
def test_a_python_on_path_that_does_not_work_is_reported(tmp_path, monkeypatch, body, says):
    """A `python` on PATH that hangs, fails (the shape of Windows' Store alias: its words on stderr and
    a failing status) or prints something else: what people type gets it, so the report says so."""
    import doctor.probe.pyenv as pyenv

    monkeypatch.setattr(pyenv, "ON_PATH_TIMEOUT", 0.5)
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin/python"
    fake.write_text(body)
    fake.chmod(0o755)
    host = Host.for_test(Path("/"), {"PATH": str(tmp_path / "bin")}, python=sys.executable)
    facts = detect_pyenv(host)
    assert facts.python_on_path == str(fake) and facts.python_on_path_prefix is None
    assert facts.python_on_path_problem.startswith(f"{fake} {says}")
    [finding] = [f for f in pyenv_area(facts).findings if f.id == "probe.failed"]
    assert finding.title.startswith(f"`python` on PATH does not work: {fake} {says}")
    assert f"run `{fake} -c 'import sys; print(sys.executable)'` yourself" in finding.fix


def test_variables_collect_env_reports():
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin", "NCCL_DEBUG": "INFO", "CUDA_MODULE_LOADING": "LAZY",
                                     "HOME": "/root"}, python=sys.executable)
    facts = detect_pyenv(host)
    assert facts.variables == {"NCCL_DEBUG": "INFO", "CUDA_MODULE_LOADING": "LAZY"}


@pytest.mark.parametrize("bad, says", [("/nonexistent/python", "No such file or directory"),
                                       ("/bin/true", "did not answer like a Python interpreter"),
                                       ("/bin/false", "could not run it (it exited with 1)")])
def test_not_an_interpreter_is_a_usage_error(bad, says):
    with pytest.raises(UsageError) as err:
        interpreter_host(Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin"}), bad)
    assert err.value.exit_code == 2 and err.value.message.startswith(f"--python {bad}") and says in err.value.message


def test_own_interpreter_answers_in_process_as_the_subprocess_would(tmp_path):
    """The in-process answer (issue 19: no second Python for the doctor's own interpreter) equals
    what `python -I -c SCRIPT` prints, with PYTHONPATH set so that -I has something to drop."""
    import json

    from doctor.probe.pyenv import SCRIPT

    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{Path.cwd()}"}
    ask = "import json; from doctor.host import Host; print(json.dumps(Host.from_system().own_interpreter()))"
    own = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, env=env, check=True)
    isolated = subprocess.run([sys.executable, "-I", "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    assert json.loads(own.stdout) == json.loads(isolated.stdout)
    assert str(tmp_path) not in json.loads(own.stdout)["path"]
    # Any other interpreter, or a test root, is asked for real.
    assert Host.for_test(tmp_path, python=sys.executable).own_interpreter() is None
    assert Host.for_test(Path("/"), python="/usr/bin/python3").own_interpreter() is None


def test_the_torch_that_import_takes_before_the_installed_one(tmp_path):
    """A torch/ on PYTHONPATH, and a PyTorch checkout's torch/ (no version.py) in the current folder:
    what the doctor says `import torch` takes is what a real `python -c 'import torch'` takes."""
    import json

    from testsupport.support import REPO, doctor_subprocess

    shadow = tmp_path / "old"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch/__init__.py").write_text("")
    (shadow / "torch/version.py").write_text("__version__ = '1.8.0'\n")
    checkout = tmp_path / "pytorch"
    (checkout / "torch").mkdir(parents=True)
    (checkout / "torch/__init__.py").write_text("")
    plain = tmp_path / "plain"
    plain.mkdir()
    cases = [({"PYTHONPATH": f"{shadow}{os.pathsep}{REPO}"}, plain, "PYTHONPATH", "1.8.0"),
             ({}, checkout, "current folder", None)]
    for env, cwd, via, version in cases:
        real = subprocess.run([sys.executable, "-c", "import torch, os; print(os.path.dirname(torch.__file__))"],
                              cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
        data = json.loads(doctor_subprocess("check", "--json", env=env, cwd=cwd).stdout)
        pyenv = data["facts"]["pyenv"]
        assert (pyenv["torch_import"], pyenv["torch_import_via"]) == (real.stdout.strip(), via)
        assert (pyenv["torch_import_version"], pyenv["torch_import_installed"]) == (version, False)
        (finding,) = [f for f in data["findings"] if f["id"] == "python.torch-shadowed"]
        assert finding["title"].startswith(f"`import torch` takes {real.stdout.strip()} (")
    (shadow / "torch/version.py").write_text(f"__version__ = '{'9' * 60_000}'\n")  # shown clipped
    data = json.loads(doctor_subprocess("check", "--json", env=cases[0][0], cwd=plain).stdout)
    assert len(data["facts"]["pyenv"]["torch_import_version"]) == 100
    data = json.loads(doctor_subprocess("check", "--json", cwd=plain).stdout)
    assert data["facts"]["pyenv"]["torch_import_installed"] is True
    assert not [f for f in data["findings"] if f["id"] == "python.torch-shadowed"]
    # An editable install: the distribution's record lies apart from its package, the checkout.
    editable = tmp_path / "editable-site"
    (editable / "torch-2.99.0.dist-info").mkdir(parents=True)
    (editable / "torch-2.99.0.dist-info/METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.99.0\n")
    env = {"PYTHONPATH": f"{editable}{os.pathsep}{REPO}"}
    data = json.loads(doctor_subprocess("check", "--json", env=env, cwd=checkout).stdout)
    assert [p["version"] for p in data["facts"]["pyenv"]["packages"] if p["name"] == "torch"] == ["2.99.0"]
    assert not [f for f in data["findings"] if f["id"] == "python.torch-shadowed"]


@pytest.mark.parametrize("which", ["venv", "base"])
def test_python_on_path_answer_without_site_is_what_site_gives(venv, which):
    """`python` on PATH is asked with -S (issue 19): the prefix from PEP 405's rule is the one the
    real interpreter gets from site, for a venv and for the base interpreter."""
    from doctor.probe.pyenv import ask_python_on_path

    python = str(venv / "bin/python") if which == "venv" else sys.executable
    real = subprocess.run([python, "-I", "-c", "import sys; print(sys.executable); print(sys.prefix)"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin"})
    assert ask_python_on_path(host, python) == (tuple(real), "")


@pytest.mark.parametrize("prints", ["", "not json", '{"executable": "/x"}', '["/x", "/y"]',
                                    '{"executable": "/x", "prefix": 7}', '{"executable": "' + "x" * 5000 + '", "prefix": "/p"}'])
def test_python_on_path_that_answers_otherwise_is_not_believed(tmp_path, prints):
    from doctor.probe.pyenv import ask_python_on_path

    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{prints}\nEOF\n")
    fake.chmod(0o755)
    assert ask_python_on_path(Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin"}), str(fake)) == (
        None, f"{fake} did not answer like a Python interpreter")


def test_check_with_python_asks_that_interpreter_once(venv):
    """interpreter_host's answer is kept for detect_pyenv: `check --python X` starts X once."""
    base = Host.for_test(Path("/"), {"PATH": str(venv / "bin")}, sys_path=[])
    host = interpreter_host(base, str(venv / "bin/python"))
    asked = []
    run = Host.run
    host.run = lambda argv, *a, **k: asked.append(argv) or run(host, argv, *a, **k)
    assert detect_pyenv(host).venv and asked == []


def test_python_on_path_that_is_another_name_of_the_same_interpreter_is_not_asked(venv):
    """python and python3 in one folder, one binary (a venv, pyenv's versions/X/bin): one interpreter,
    one prefix, so no second Python is started for it; a copy elsewhere is asked."""
    host = interpreter_host(Host.for_test(Path("/"), {"PATH": str(venv / "bin")}), str(venv / "bin/python3"))
    asked = []
    run = Host.run
    host.run = lambda argv, *a, **k: asked.append(argv) or run(host, argv, *a, **k)
    facts = detect_pyenv(host)
    assert asked == [] and facts.python_on_path == str(venv / "bin/python")
    assert facts.python_on_path_prefix == facts.prefix == str(venv) and pyenv_area(facts).findings == []
