"""Which libtorch `cargo build` of a tch-rs crate would link, modelled on torch-sys/build.rs.

Read at LaurentMazare/tch-rs a1dc7ecec800afb99fff031bf1febe876ecf1572 (torch-sys 0.24.0):

1. LIBTORCH_USE_PYTORCH set (any value): run `python3` (`python` when VIRTUAL_ENV is set),
   take include/lib dirs, the version (checked) and the ABI from `torch._C._GLIBCXX_USE_CXX11_ABI`.
2. otherwise the prefix is LIBTORCH, else /usr when /usr/lib/libtorch.so exists (Linux), else
   a download into OUT_DIR (only with the `download-libtorch` feature; TORCH_CUDA_VERSION picks
   cpu/cuXY), else the build fails with "Cannot find a libtorch install".
   includes = $LIBTORCH_INCLUDE/include (+ include/torch/csrc/api/include), else <prefix>/include
   lib dir  = $LIBTORCH_LIB/lib, else <prefix>/lib
   the version is checked only when <prefix>/build-version exists;
   the ABI is LIBTORCH_CXX11_ABI, default "1" — never read from the tree.
3. LIBTORCH_BYPASS_VERSION_CHECK set (any value) skips the version check.
4. LIBTORCH_STATIC unset/"0"/"false"/"FALSE": dynamic; anything else: static.
5. libtorch_cuda.so in the lib dir: also link torch_cuda (and torch_cuda_cu/_cpp, torch_hip).

This module reads files only (never runs Python): for step 1 it uses the python_torch facts.
"""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import PurePath

from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.python_torch import PythonTorch
from doctor.record import record

TCH_VARIABLES = (
    "LIBTORCH", "LIBTORCH_INCLUDE", "LIBTORCH_LIB", "LIBTORCH_USE_PYTORCH", "LIBTORCH_STATIC",
    "LIBTORCH_CXX11_ABI", "LIBTORCH_BYPASS_VERSION_CHECK", "TORCH_CUDA_VERSION",
)


@record
class CrateLock:
    """tch / torch-sys as Cargo.lock pins them."""

    path: str
    tch: str | None
    torch_sys: str | None


@record
class TchResolution:
    """The libtorch tch-rs would link here, and which rule of its build.rs chose it."""
    mode: str  # "pytorch" | "LIBTORCH" | "system" | "download" | "none"
    why: str
    prefix: str | None  # the LIBTORCH-like prefix (build-version is read there)
    include_dirs: list[str]
    lib_dir: str | None
    include_from: str  # "LIBTORCH_INCLUDE" | "LIBTORCH" | "/usr" | "python" | ""
    lib_from: str
    cxx11_abi: str | None  # "0" | "1" (what -D_GLIBCXX_USE_CXX11_ABI= the shim is compiled with)
    abi_from: str  # "LIBTORCH_CXX11_ABI" | "default" | "python"
    static: bool
    bypass_version_check: bool
    checked_version: str | None  # the version build.rs would compare (None: it compares nothing)
    checked_from: str  # where that version comes from
    links_cuda: bool
    python_interpreter: str
    include_ok: bool = True  # <include>/torch exists
    lib_ok: bool = True  # <lib dir>/libc10 exists
    include_fix: str | None = None  # the value LIBTORCH_INCLUDE (or LIBTORCH) should have, when one level off
    lib_fix: str | None = None
    download_device: str | None = None  # with TORCH_CUDA_VERSION, what the download feature asks for
    set_variables: dict[str, str] = field(default_factory=dict)
    crate: CrateLock | None = None
    evidence: list[Evidence] = field(default_factory=list)


def read_cargo_lock(host: Host, path: str | None = None) -> CrateLock | None:
    """tch / torch-sys versions from Cargo.lock (`path`, else ./Cargo.lock); None when absent."""
    lock = PurePath(path) if path else host.cwd / "Cargo.lock"
    text = host.read_text(lock, limit=8 << 20)
    if text is None:
        return None
    import tomllib

    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return CrateLock(str(lock), None, None)
    packages = data.get("package") if isinstance(data, dict) else None
    found: dict[str, str] = {}
    for pkg in packages if isinstance(packages, list) else []:
        if isinstance(pkg, dict) and pkg.get("name") in ("tch", "torch-sys") and isinstance(pkg.get("version"), str):
            version = pkg["version"][:40]
            if re.fullmatch(r"[0-9A-Za-z.+-]+", version):
                found.setdefault(pkg["name"], version)
    return CrateLock(str(lock), found.get("tch"), found.get("torch-sys"))


def cuda_device(value: str) -> str:
    """build.rs's TORCH_CUDA_VERSION → device: trim, lowercase, drop a leading "cu", keep two
    dot-separated parts, concatenate after "cu" ("12.8" → cu128, "cu12.8.1" → cu128)."""
    v = value.strip().lower()
    while v.startswith("cu"):  # Rust's trim_start_matches removes every leading repeat
        v = v[2:]
    return "cu" + "".join(v.split(".")[:2])


def resolve_tch(host: Host, python: PythonTorch | None, cargo_lock: str | None = None) -> TchResolution:
    env = host.env
    set_vars = {k: env[k] for k in TCH_VARIABLES if k in env}
    interpreter = "python" if "VIRTUAL_ENV" in env else "python3"
    static = env.get("LIBTORCH_STATIC") not in (None, "0", "false", "FALSE")
    bypass = "LIBTORCH_BYPASS_VERSION_CHECK" in env
    lib_name = "libtorch.dylib" if host.system == "Darwin" else "libtorch.so"
    if "LIBTORCH_USE_PYTORCH" in env:
        root = python.libtorch_root if python else None
        res = TchResolution(
            mode="pytorch",
            why=f"LIBTORCH_USE_PYTORCH is set: torch-sys asks `{interpreter}` for torch's include and lib dirs",
            prefix=root,
            include_dirs=[str(PurePath(root) / "include"), str(PurePath(root) / "include/torch/csrc/api/include")] if root else [],
            lib_dir=str(PurePath(root) / "lib") if root else None,
            include_from="python", lib_from="python",
            cxx11_abi=None, abi_from="python",  # torch._C._GLIBCXX_USE_CXX11_ABI: the tree's own, by construction
            static=static, bypass_version_check=bypass,
            checked_version=(python.base_version if python else None), checked_from="torch.__version__",
            links_cuda=False, python_interpreter=interpreter, set_variables=set_vars,
        )
    else:
        if "LIBTORCH" in env:
            prefix, mode, why = env["LIBTORCH"], "LIBTORCH", "LIBTORCH is set"
        elif host.system == "Linux" and host.exists(f"/usr/lib/{lib_name}"):
            prefix, mode, why = "/usr", "system", "/usr/lib/libtorch.so exists (torch-sys's system-wide install)"
        else:
            prefix, mode = None, "none"
            why = ("LIBTORCH is not set and /usr/lib/libtorch.so does not exist: torch-sys fails with "
                   "\"Cannot find a libtorch install\" unless the crate enables the download-libtorch feature")
        include_base = env.get("LIBTORCH_INCLUDE") or prefix
        lib_base = env.get("LIBTORCH_LIB") or prefix
        version = checked_from = None
        if prefix is not None:
            bv = PurePath(prefix) / "build-version"
            text = host.read_text(bv, limit=4096)
            if text is not None:
                version = text.strip().split("+")[0][:64]
                checked_from = str(bv)
        res = TchResolution(
            mode=mode, why=why, prefix=prefix,
            include_dirs=[str(PurePath(include_base) / "include"), str(PurePath(include_base) / "include/torch/csrc/api/include")] if include_base else [],
            lib_dir=str(PurePath(lib_base) / "lib") if lib_base else None,
            include_from="LIBTORCH_INCLUDE" if env.get("LIBTORCH_INCLUDE") else mode,
            lib_from="LIBTORCH_LIB" if env.get("LIBTORCH_LIB") else mode,
            cxx11_abi=env.get("LIBTORCH_CXX11_ABI", "1"),
            abi_from="LIBTORCH_CXX11_ABI" if "LIBTORCH_CXX11_ABI" in env else "default",
            static=static, bypass_version_check=bypass,
            checked_version=version, checked_from=checked_from or "",
            links_cuda=False, python_interpreter=interpreter, set_variables=set_vars,
        )
        if mode == "none" and "TORCH_CUDA_VERSION" in env:
            res.download_device = cuda_device(env["TORCH_CUDA_VERSION"])
    _check_dirs(host, res)
    if res.lib_dir:
        cuda = "libtorch_cuda.dylib" if host.system == "Darwin" else "libtorch_cuda.so"
        res.links_cuda = host.exists(PurePath(res.lib_dir) / cuda)
    res.evidence = [Evidence("env", k, v) for k, v in set_vars.items()]
    res.crate = read_cargo_lock(host, cargo_lock)
    return res


def _check_dirs(host: Host, res: TchResolution) -> None:
    """Does each dir hold what build.rs appends to it? If not, is the variable one level too deep
    (named .../include or .../lib) — then its parent is the value it should have."""
    c10 = {"Darwin": "libc10.dylib"}.get(host.system, "libc10.so")
    if res.include_dirs:
        inc = PurePath(res.include_dirs[0])
        res.include_ok = host.is_dir(inc / "torch")
        given = inc.parent
        if not res.include_ok and host.is_dir(given / "torch") and given.name == "include":
            res.include_fix = str(given.parent)
    if res.lib_dir:
        lib = PurePath(res.lib_dir)
        res.lib_ok = host.exists(lib / c10)
        given = lib.parent
        if not res.lib_ok and host.exists(given / c10) and given.name == "lib":
            res.lib_fix = str(given.parent)


def relevant(host: Host, res: TchResolution) -> bool:
    """Worth a report area: a tch-rs variable is set or a Cargo.lock pins tch / torch-sys."""
    tch_only = set(res.set_variables) - {"LIBTORCH"}
    return bool(tch_only) or bool(res.crate and (res.crate.tch or res.crate.torch_sys))
