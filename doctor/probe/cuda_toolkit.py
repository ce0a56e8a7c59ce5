"""The CUDA toolkit a build would use, found as PyTorch's extension builder finds it.

`torch.utils.cpp_extension._find_cuda_home`: $CUDA_HOME, else $CUDA_PATH, else the directory
above `nvcc` on PATH, else /usr/local/cuda when it exists. conda's `cuda-nvcc` and pip's
`nvidia-cuda-nvcc-*` are listed too (they are only used when on PATH or named by CUDA_HOME).
The host compiler nvcc would call: `-ccbin` in NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS,
$CUDAHOSTCXX (CMake), $NVCC_CCBIN (nvcc), $CC (cpp_extension passes it as -ccbin), else gcc on PATH.
Facts only: diagnose/cuda_stack.py judges them.
"""

from __future__ import annotations

import json
import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from pathlib import PurePath

from doctor.host import Host
from doctor.model import Evidence
from doctor.record import record

NVCC_RELEASE = re.compile(r"release (\d+[.]\d+)")  # cpp_extension._check_cuda_version's own regex
NVCC_FULL = re.compile(r"release \d+\.\d+, V(\d+\.\d+\.\d+)")


@record
class ToolkitCandidate:
    """One CUDA toolkit found on the machine (CUDA_HOME, PATH, /usr/local/cuda, conda, pip)."""
    origin: str  # "CUDA_HOME", "CUDA_PATH", "nvcc on PATH", "/usr/local/cuda", "conda", "pip"
    root: str
    nvcc: str | None  # root/bin/nvcc when it exists
    release: str | None = None  # "12.4" (what cpp_extension compares)
    nvcc_version: str | None = None  # "12.4.131"
    file_version: str | None = None  # version.json's cuda.version or version.txt's "CUDA Version"
    gpu_codes: list[str] = field(default_factory=list)  # `nvcc --list-gpu-code`: sm_75, sm_90a … (active one only)
    headers: bool = False  # include/cuda_runtime.h (what cpp_extension passes as -I$CUDA_HOME/include)
    evidence: list[Evidence] = field(default_factory=list)


@record
class HostCompiler:
    """The compiler nvcc would call, and where that choice came from."""
    chosen_by: str  # "-ccbin in NVCC_PREPEND_FLAGS", "CUDAHOSTCXX", "NVCC_CCBIN", "CC", "gcc on PATH"
    path: str | None
    kind: str | None  # "gcc" | "clang" | None
    version: str | None  # "13.2.0"
    evidence: list[Evidence] = field(default_factory=list)
    problem: str = ""  # why `--version` gave no answer: "/usr/bin/gcc timed out after 5 s", "… exited with status 1"


@record
class CudaToolkitFacts:
    """The CUDA toolkits found, the one a build would use, and nvcc's host compiler."""
    cuda_home: str | None  # what cpp_extension would use
    cuda_home_via: str  # which of its rules chose it ("" when none)
    candidates: list[ToolkitCandidate] = field(default_factory=list)
    host_compiler: HostCompiler | None = None
    allow_unsupported_compiler: bool = False  # -allow-unsupported-compiler in NVCC_*_FLAGS
    # What CUDA_HOME / CUDA_PATH names when one of them chose cuda_home (Host.path_kind: "directory",
    # "missing", "file", "dangling", …), and for a ~ kept literal the folder it names expanded
    cuda_home_kind: str | None = None
    cuda_home_tilde: str | None = None
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def active(self) -> ToolkitCandidate | None:
        return next((c for c in self.candidates if c.root == self.cuda_home), None)


def parse_nvcc_banner(text: str) -> tuple[str | None, str | None]:
    """("12.4", "12.4.131") from `nvcc --version` output."""
    release = NVCC_RELEASE.search(text)
    full = NVCC_FULL.search(text)
    return (release.group(1) if release else None, full.group(1) if full else None)


def parse_version_json(text: str) -> str | None:
    """"12.4.1" from a toolkit's version.json ({"cuda": {"name": "CUDA SDK", "version": ...}})."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    cuda = data.get("cuda") if isinstance(data, dict) else None
    version = cuda.get("version") if isinstance(cuda, dict) else None
    return version if isinstance(version, str) and re.fullmatch(r"\d+(\.\d+){1,3}", version) else None


def parse_version_txt(text: str) -> str | None:
    """"10.2.89" from version.txt ("CUDA Version 10.2.89"), which toolkits before 11.1 carry."""
    m = re.search(r"CUDA Version (\d+(?:\.\d+){1,3})", text)
    return m.group(1) if m else None


def parse_compiler_banner(text: str) -> tuple[str | None, str | None]:
    """("gcc", "13.2.0") or ("clang", "18.1.3") from `$CC --version`."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    kind = "clang" if "clang" in first.lower() else \
        "gcc" if re.match(r"(\S*/)?(gcc|g\+\+|cc|c\+\+)(-\d+)? \(", first) or "(GCC)" in first else None
    m = re.search(r"version (\d+\.\d+(?:\.\d+)?)", first) or re.search(r"\) (\d+\.\d+(?:\.\d+)?)", first) \
        or re.search(r"(\d+\.\d+\.\d+)", first)
    return kind, (m.group(1) if m else None)


def _which(host: Host, name: str) -> str | None:
    """`which` as the user sees the path: a test host's PATH holds real directories under its root."""
    path = host.which(name)
    if path and host.root != PurePath("/"):
        try:
            return "/" + str(PurePath(path).relative_to(host.root))
        except ValueError:
            return path
    return path


def find_cuda_home(host: Host) -> tuple[str | None, str, list[Evidence]]:
    """cpp_extension._find_cuda_home on this host (Linux/macOS branch)."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if host.env.get(var):
            return host.env[var], var, [Evidence("env", var, host.env[var])]
    nvcc = _which(host, "nvcc")
    if nvcc:
        return str(PurePath(nvcc).parent.parent), "nvcc on PATH", [Evidence("derived", "which nvcc", nvcc)]
    if host.exists("/usr/local/cuda"):
        return "/usr/local/cuda", "/usr/local/cuda", [Evidence("file", "/usr/local/cuda", "exists")]
    return None, "", [Evidence("derived", "CUDA_HOME", "unset; no nvcc on PATH; no /usr/local/cuda")]


def _candidate_roots(host: Host, cuda_home: str | None, via: str) -> list[tuple[str, str]]:
    roots: list[tuple[str, str]] = []
    if cuda_home:
        roots.append((via, cuda_home))
    nvcc = _which(host, "nvcc")
    if nvcc:
        roots.append(("nvcc on PATH", str(PurePath(nvcc).parent.parent)))
    if host.exists("/usr/local/cuda"):
        roots.append(("/usr/local/cuda", "/usr/local/cuda"))
    prefix = host.env.get("CONDA_PREFIX")
    if prefix and host.exists(PurePath(prefix) / "bin" / "nvcc"):
        roots.append(("conda", prefix))
    for entry in host.sys_path:
        for sub in ("nvidia/cuda_nvcc", "nvidia/cu13"):  # nvidia-cuda-nvcc-cu12 / -cu13 wheels
            root = PurePath(entry) / sub
            if entry and host.exists(root / "bin" / "nvcc"):
                roots.append(("pip", str(root)))
    seen: set[str] = set()
    return [(o, r) for o, r in roots if not (r in seen or seen.add(r))]


def inspect_candidate(host: Host, origin: str, root: str, timeout: float) -> ToolkitCandidate:
    nvcc = PurePath(root) / "bin" / "nvcc"
    cand = ToolkitCandidate(origin, root, str(nvcc) if host.exists(nvcc) else None)
    if cand.nvcc:
        run = host.ask([str(host.real(nvcc)), "--version"], timeout=timeout)
        if run.ok:
            cand.release, cand.nvcc_version = parse_nvcc_banner(run.stdout)
        line = next((x for x in run.stdout.splitlines() if "release" in x), None) if run.ok else None
        cand.evidence.append(Evidence("command", f"{nvcc} --version", (line or run.error or run.stderr.strip()[:200] or
                                                                       f"exit status {run.returncode}").strip()))
    else:
        cand.evidence.append(Evidence("file", str(nvcc), "missing"))
    cand.headers = host.exists(PurePath(root) / "include" / "cuda_runtime.h")
    for name, parse in (("version.json", parse_version_json), ("version.txt", parse_version_txt)):
        text = host.read_text(PurePath(root) / name, limit=1 << 16)
        if text is not None and (version := parse(text)):
            cand.file_version = version
            cand.evidence.append(Evidence("file", f"{root}/{name}", version))
            break
    return cand


def _nvcc_flag_words(host: Host) -> list[tuple[str, list[str]]]:
    out = []
    for var in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"):
        value = host.env.get(var, "")
        try:
            words = shlex.split(value)
        except ValueError:
            words = value.split()
        out.append((var, words))
    return out


def find_host_compiler(host: Host, timeout: float) -> tuple[HostCompiler | None, bool]:
    """The compiler nvcc would call, and whether -allow-unsupported-compiler is set."""
    chosen: tuple[str, str] | None = None
    allow = False
    for var, words in _nvcc_flag_words(host):
        for i, w in enumerate(words):
            if w in ("-allow-unsupported-compiler", "--allow-unsupported-compiler"):
                allow = True
            value = None
            if w in ("-ccbin", "--compiler-bindir") and i + 1 < len(words):
                value = words[i + 1]
            elif w.startswith(("-ccbin=", "--compiler-bindir=")):
                value = w.split("=", 1)[1]
            if value and chosen is None:
                chosen = (f"-ccbin in {var}", value)
    for var in ("CUDAHOSTCXX", "NVCC_CCBIN", "CC"):
        if chosen is None and host.env.get(var):
            chosen = (var, host.env[var].split()[0])
    if chosen is None:
        chosen = ("gcc on PATH", "gcc")
    via, name = chosen
    path = name if "/" in name else _which(host, name)
    if path and host.is_dir(path):  # -ccbin may name a directory holding gcc
        path = str(PurePath(path) / "gcc")
    compiler = HostCompiler(via, path, None, None, [Evidence("env" if via != "gcc on PATH" else "derived", via, name)])
    if path is None:
        compiler.evidence.append(Evidence("derived", "which", f"{name}: not found"))
        return compiler, allow
    run = host.ask([str(host.real(path)), "--version"], timeout=timeout)
    if run.ok:
        compiler.kind, compiler.version = parse_compiler_banner(run.stdout)
    else:
        compiler.problem = run.error or f"`{path} --version` exited with status {run.returncode}"
    said = run.stdout.strip().splitlines()[:1] or [run.error or f"exit status {run.returncode}"]
    compiler.evidence.append(Evidence("command", f"{path} --version", said[0]))
    return compiler, allow


def detect_cuda_toolkit(host: Host, timeout: float = 5.0) -> CudaToolkitFacts:
    cuda_home, via, evidence = find_cuda_home(host)
    facts = CudaToolkitFacts(cuda_home, via, evidence=evidence)
    if cuda_home and via in ("CUDA_HOME", "CUDA_PATH"):
        facts.cuda_home_kind = host.path_kind(cuda_home)
        facts.cuda_home_tilde = host.tilde_expanded(cuda_home)
    # Each candidate's nvcc and the host compiler are separate processes: ask them side by side.
    with ThreadPoolExecutor(max_workers=4) as pool:
        compiler = pool.submit(find_host_compiler, host, timeout)
        candidates = [pool.submit(inspect_candidate, host, o, r, timeout) for o, r in _candidate_roots(host, cuda_home, via)]
        facts.candidates = [c.result() for c in candidates]
        facts.host_compiler, facts.allow_unsupported_compiler = compiler.result()
    active = facts.active
    if active and active.release and active.nvcc:
        run = host.ask([str(host.real(active.nvcc)), "--list-gpu-code"], timeout=timeout)
        if run.ok:
            active.gpu_codes = parse_gpu_codes(run.stdout)
            active.evidence.append(Evidence("command", f"{active.nvcc} --list-gpu-code", " ".join(active.gpu_codes)))
    return facts


def parse_gpu_codes(text: str) -> list[str]:
    """["sm_75", "sm_80", …] from `nvcc --list-gpu-code` (one per line)."""
    return [w for w in text.split() if re.fullmatch(r"sm_\d+[af]?", w)][:64]
