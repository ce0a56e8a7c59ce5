"""The Python environment, as torch's collect_env reports it, without importing torch.

The interpreter is asked (a subprocess printing JSON) for its version, implementation, prefixes
and sys.path; packages are then read over that sys.path from `*.dist-info/METADATA` (and
`INSTALLER`, conda's `conda-meta/`), so `--python PATH` inspects a project's venv as well as the
doctor's own interpreter. Facts only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import field
from pathlib import PurePath

from doctor.errors import DoctorError, UsageError
from doctor.host import Host
from doctor.model import Evidence
from doctor.record import record

SCRIPT = (
    "import importlib.machinery, json, os, platform, sys; print(json.dumps({'version': platform.python_version(), "
    "'implementation': platform.python_implementation(), 'executable': sys.executable, "
    "'realpath': os.path.realpath(sys.executable), 'prefix': sys.prefix, 'base_prefix': sys.base_prefix, "
    "'path': [p for p in sys.path if p], 'extension_suffixes': importlib.machinery.EXTENSION_SUFFIXES}))"
)
FAMILY = re.compile(r"^(torch|torchvision|torchaudio|torchtext|torchdata|triton|pytorch-triton(?:-\w+)?|nvidia-[\w-]+|numpy|"
                    r"torch-doctor)$")
VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "CUDA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING", "TORCH_CUDA_ARCH_LIST",
             "PYTORCH_ROCM_ARCH", "CUDA_HOME", "LD_LIBRARY_PATH")
# `python` on PATH is asked only what it is and which prefix it runs in, without site (-S): site's
# .pth files can cost more than the answer (~100 ms of CPU on the project's box, issue 19). A venv's
# prefix is then found by PEP 405's rule, as site.venv() applies it: a pyvenv.cfg beside the
# executable or one folder up makes the executable's parent folder the prefix.
ON_PATH_SCRIPT = (
    "import json, os, sys; d = os.path.dirname(os.path.abspath(sys.executable)); "
    "venv = any(os.path.isfile(os.path.join(x, 'pyvenv.cfg')) for x in (d, os.path.dirname(d))); "
    "print(json.dumps({'executable': sys.executable, 'prefix': os.path.dirname(d) if venv else sys.prefix}))"
)
ON_PATH_TIMEOUT = 5.0
MAX_PATH = 4096
MAX_OUTPUT = 1 << 20


@record
class Package:
    """An installed torch-family distribution."""
    name: str
    version: str
    installer: str  # "pip", "uv", "conda", "" (unknown)
    location: str


@record
class PyEnvFacts:
    """The Python environment as torch's collect_env reports it, read without importing torch."""
    python: str  # the interpreter inspected
    realpath: str
    version: str
    implementation: str
    prefix: str
    base_prefix: str
    venv: bool
    conda: bool  # the prefix is a conda environment (conda-meta/)
    sys_path: list[str]
    packages: list[Package] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    python_on_path: str | None = None  # `python` (or `python3`) on PATH: its sys.executable
    python_on_path_prefix: str | None = None  # and its sys.prefix
    python_on_path_problem: str = ""  # why it gave neither ("/usr/bin/python timed out after 5 s", "… exited with status 1: …")
    # The torch package `import torch` takes: a torch/ in the current folder first (python -c, -m,
    # the REPL and a script here put it there), then sys.path in order.
    torch_import: str | None = None
    torch_import_via: str | None = None  # "current folder" | "PYTHONPATH" | "sys.path"
    torch_import_version: str | None = None  # its version.py's __version__; None: none (a source tree)
    torch_import_installed: bool = True  # it is the installed torch distribution's package
    # The installed torch's compiled extension: the torch/_C.* files there, and whether one of them is
    # a name this interpreter loads (its EXTENSION_SUFFIXES); None: not looked at (no installed torch,
    # or `import torch` takes another one).
    torch_extensions: list[str] = field(default_factory=list)
    torch_extension_loadable: bool | None = None
    extension_suffixes: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


def ask_interpreter(host: Host, python: str, timeout: float = 10.0) -> dict:
    """The interpreter's own answer; DoctorError when it is not a working Python."""
    if python == host.python and (own := host.own_interpreter()) is not None:
        return own
    run = host.ask([python, "-I", "-c", SCRIPT], timeout=timeout)
    if not run.ok:
        raise UsageError(f"--python {python}: could not run it ({run.error or run.stderr.strip()[:200] or f'it exited with {run.returncode}'})",
                          "pass the path of a Python interpreter, e.g. .venv/bin/python")
    try:
        data = json.loads(run.stdout[:MAX_OUTPUT])
    except ValueError:
        data = None
    keys = {"version": str, "implementation": str, "executable": str, "realpath": str, "prefix": str,
            "base_prefix": str, "path": list}
    if not isinstance(data, dict) or any(not isinstance(data.get(k), t) for k, t in keys.items()) \
            or not all(isinstance(p, str) for p in data["path"]):
        raise UsageError(f"--python {python}: it did not answer like a Python interpreter",
                          "pass the path of a Python ≥ 3.8 interpreter")
    data["path"] = data["path"][:256]
    return data


def python_on_path(host: Host) -> str | None:
    return host.which("python") or host.which("python3")


def same_interpreter(host: Host, a: str, b: str) -> bool:
    """Two names of one interpreter: the same path, or two names in one folder for one binary
    (python and python3 → python3.11, as pyenv and venvs lay them out). Their sys.prefix is the same:
    getpath finds it from the binary, and a venv's pyvenv.cfg is looked for beside the name run."""
    if a == b:
        return True
    if PurePath(a).parent != PurePath(b).parent:
        return False
    try:
        return host.real(a).resolve() == host.real(b).resolve()
    except (OSError, RuntimeError, ValueError):
        return False


def ask_python_on_path(host: Host, python: str) -> tuple[tuple[str, str] | None, str]:
    """((sys.executable, sys.prefix), "") of `python`, or (None, why not) when it does not answer
    like a Python: it hung, failed (a Windows Store alias exits 9009 saying Python was not found),
    or printed something else."""
    run = host.run([python, "-I", "-S", "-c", ON_PATH_SCRIPT], timeout=ON_PATH_TIMEOUT)
    if not run.ok:
        if run.error:
            return None, run.error
        from doctor.formats import clip

        said = next((line.strip() for line in (run.stderr + "\n" + run.stdout)[:MAX_OUTPUT].splitlines() if line.strip()), "")
        return None, f"{python} exited with status {run.returncode}" + (f": {clip(said, 160)}" if said else "")
    try:
        data = json.loads(run.stdout[:MAX_OUTPUT])
    except ValueError:
        data = None
    answer = (data.get("executable"), data.get("prefix")) if isinstance(data, dict) else ()
    if len(answer) == 2 and all(isinstance(a, str) and 0 < len(a) <= MAX_PATH for a in answer):
        return answer, ""
    return None, f"{python} did not answer like a Python interpreter"


def interpreter_host(host: Host, python: str) -> Host:
    """The same host, seen from another interpreter: its sys.path decides which torch is found."""
    data = ask_interpreter(host, python)
    # -I drops the script's directory and PYTHONPATH; keep PYTHONPATH as that interpreter would see it.
    extra = [p for p in host.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return host.seen_from(data["executable"], extra + data["path"])


def read_packages(host: Host, sys_path: list[str]) -> list[Package]:
    found: dict[str, Package] = {}
    for entry in sys_path:
        for name in host.listdir(entry):
            if not name.endswith(".dist-info"):
                continue
            # The directory is named after the normalised distribution name (`nvidia_nccl_cu12-2.21.5`):
            # only a torch-family one has its METADATA read.
            if not FAMILY.match(re.sub(r"[-_.]+", "-", name.split("-", 1)[0]).lower()):
                continue
            base = PurePath(entry) / name
            text = host.read_text(base / "METADATA", limit=1 << 16) or ""
            meta = dict(m.groups() for m in re.finditer(r"^(Name|Version): *(.+?) *$", text.split("\n\n")[0], re.M))
            dist = re.sub(r"[-_.]+", "-", meta.get("Name", "")).lower()
            if not dist or not FAMILY.match(dist) or dist in found:  # the first on sys.path wins, as for imports
                continue
            installer = (host.read_text(base / "INSTALLER", limit=64) or "").strip().lower()[:16]
            found[dist] = Package(dist, meta.get("Version", "?"), installer, str(entry))
    return sorted(found.values(), key=lambda p: p.name)


def _torch_import(host: Host, facts: PyEnvFacts) -> None:
    """Which torch package `import torch` takes, and whether it is the installed distribution's: a
    PyTorch source checkout in the current folder, or another copy on PYTHONPATH, wins over it."""
    from doctor.formats import clip
    from doctor.probe.versions import parse_version_py

    pythonpath = {p for p in host.env.get("PYTHONPATH", "").split(os.pathsep) if p}
    places = [(str(host.cwd), "current folder")] + [(e, "PYTHONPATH" if e in pythonpath else "sys.path")
                                                     for e in facts.sys_path if e]
    found = next(((str(PurePath(entry) / "torch"), via) for entry, via in places
                  if host.is_file(PurePath(entry) / "torch" / "__init__.py")), None)
    installed = next((p for p in facts.packages if p.name == "torch"), None)
    # An editable install (pip install -e of a checkout) keeps no torch/ beside its dist-info:
    # the checkout is its package, not a shadow of it.
    if found is None or installed is None or not host.is_file(PurePath(installed.location) / "torch" / "__init__.py"):
        return
    facts.torch_import, facts.torch_import_via = found
    text = host.read_text(PurePath(found[0]) / "version.py", limit=64 << 10)
    version = parse_version_py(text).get("__version__") if text else None
    facts.torch_import_version = clip(version, 100) if isinstance(version, str) else None
    try:
        same = host.real(found[0]).resolve() == host.real(PurePath(installed.location) / "torch").resolve()
    except (OSError, RuntimeError, ValueError):
        same = PurePath(found[0]).parent == PurePath(installed.location)
    facts.torch_import_installed = same
    if same:
        _torch_extension(host, facts, found[0])


def _suffixes(value) -> list[str]:
    """The interpreter's EXTENSION_SUFFIXES as it printed them: a list of short strings, or nothing."""
    return [x for x in value if isinstance(x, str) and len(x) <= 64][:16] if isinstance(value, list) else []


def _torch_extension(host: Host, facts: PyEnvFacts, package: str) -> None:
    """Whether the installed torch holds a `_C` this interpreter loads: without one, `import torch`
    takes the torch/_C/ folder of type stubs and fails ("Failed to load PyTorch C extensions")."""
    if not facts.extension_suffixes:
        return
    names = host.list_names(package) or []
    facts.torch_extensions = sorted(n for n in names if n.startswith("_C.") and n.endswith((".so", ".pyd")))[:8]
    facts.torch_extension_loadable = any("_C" + suffix in names for suffix in facts.extension_suffixes)


def detect_pyenv(host: Host) -> PyEnvFacts | None:
    try:
        data = ask_interpreter(host, host.python)
    except DoctorError:
        return None
    facts = PyEnvFacts(
        python=data["executable"], realpath=data["realpath"], version=data["version"],
        implementation=data["implementation"], prefix=data["prefix"], base_prefix=data["base_prefix"],
        venv=data["prefix"] != data["base_prefix"], conda=host.is_dir(PurePath(data["prefix"]) / "conda-meta"),
        sys_path=list(host.sys_path) or data["path"],
        extension_suffixes=_suffixes(data.get("extension_suffixes")),
        evidence=[Evidence("command", f"{host.python} -I -c <platform, sys>",
                           f"{data['implementation']} {data['version']} at {data['executable']}")],
    )
    facts.packages = read_packages(host, facts.sys_path)
    if facts.conda:
        for p in facts.packages:
            if not p.installer and host.exists(PurePath(facts.prefix) / "conda-meta"):
                metas = [m for m in host.listdir(PurePath(facts.prefix) / "conda-meta") if m.startswith(p.name + "-")]
                if metas:
                    p.installer = "conda"
    facts.variables = {k: v for k, v in host.env.items() if k in VARIABLES or k.startswith("NCCL_")}
    _torch_import(host, facts)
    on_path = python_on_path(host)
    if on_path:
        # A venv's python is a symlink to the base interpreter: what tells them apart is sys.prefix.
        facts.python_on_path, facts.python_on_path_prefix = on_path, facts.prefix
        if same_interpreter(host, on_path, facts.python):
            facts.evidence.append(Evidence("derived", f"`python` on PATH: {on_path}", "the interpreter inspected"))
        else:
            answer, facts.python_on_path_problem = ask_python_on_path(host, on_path)
            facts.python_on_path, facts.python_on_path_prefix = answer if answer else (on_path, None)
            facts.evidence.append(Evidence("command", f"{on_path} -I -S -c <sys.executable, sys.prefix>",
                                           f"{facts.python_on_path} (prefix {facts.python_on_path_prefix})"))
    return facts
