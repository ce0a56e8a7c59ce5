"""The CUDA-stack part of `doctor check` (issue 13), kept beside check.py so that check.py only
calls in: which probes run, which facts keys they fill, which areas they add."""

from __future__ import annotations

import re

from doctor.host import Host, result_of
from doctor.model import Area


def start_cuda_stack(pool, host: Host) -> dict:
    """Submit the probes that need nothing else (subprocesses: nvcc, the interpreter) to `pool`,
    so check starts them first; hand the result to gather_cuda_stack(started=...)."""
    from doctor.probe.cuda_toolkit import detect_cuda_toolkit
    from doctor.probe.pyenv import detect_pyenv

    return {"cuda_toolkit": pool.submit(detect_cuda_toolkit, host), "pyenv": pool.submit(detect_pyenv, host)}


def gather_cuda_stack(host: Host, ld_cache: dict[str, list[str]], libtorch=None, python=None,
                      started: dict | None = None) -> dict:
    """Facts keys: `cuda_toolkit`, `cuda_libs`, `libstdcxx`, `pyenv`."""
    from concurrent.futures import ThreadPoolExecutor

    from doctor.probe.cuda_libs import detect_cuda_libs
    from doctor.probe.cuda_toolkit import detect_cuda_toolkit
    from doctor.probe.libstdcxx import detect_libstdcxx
    from doctor.probe.pyenv import detect_pyenv

    active = libtorch.active_install if libtorch is not None else None
    lib_dir = active.lib_dir if active is not None and active.exists else None
    # The toolkit (nvcc, the host compiler) and the interpreter are subprocesses: run them side by side
    # with the ELF reading.
    with ThreadPoolExecutor(max_workers=3) as pool:
        toolkit = started["cuda_toolkit"] if started else pool.submit(detect_cuda_toolkit, host)
        pyenv = started["pyenv"] if started else pool.submit(detect_pyenv, host)
        libs = pool.submit(detect_cuda_libs, host, lib_dir, python.location if python is not None else None, ld_cache)
        cxx = detect_libstdcxx(host, lib_dir, ld_cache, host.python)
        return {"cuda_toolkit": result_of(toolkit), "cuda_libs": result_of(libs), "libstdcxx": cxx,
                "pyenv": result_of(pyenv)}


def _build_cudas(facts: dict) -> tuple[str | None, str | None, str]:
    """(torch.version.cuda of the Python torch, CUDA of the active libtorch, its label); the
    libtorch is left out when it is the Python torch's own tree (one build, one comparison)."""
    from doctor.diagnose.cuda_stack import cuda_of_variant

    python = facts.get("python_torch")
    libtorch = facts.get("libtorch")
    active = libtorch.active_install if libtorch is not None else None
    python_cuda = python.cuda if python is not None else None
    libtorch_cuda = cuda_of_variant(active.variant) if active is not None else None
    if active is not None and python is not None and python.libtorch_root and active.root == python.libtorch_root:
        libtorch_cuda = None
    return python_cuda, libtorch_cuda, active.label if active is not None else ""


def cuda_stack_areas(facts: dict) -> list[Area]:
    from doctor.diagnose.cuda_stack import cuda_stack_area

    areas = []
    toolkit = facts.get("cuda_toolkit")
    if toolkit is not None:
        python_cuda, libtorch_cuda, label = _build_cudas(facts)
        if python_cuda or libtorch_cuda or toolkit.candidates:
            areas.append(cuda_stack_area(toolkit, python_cuda, libtorch_cuda, label))
    from doctor.diagnose.cuda_arch import cuda_arch_area
    from doctor.diagnose.cuda_stack import libstdcxx_findings, pyenv_area

    python_cuda, libtorch_cuda, _ = _build_cudas(facts)
    active_tk = toolkit.active if toolkit is not None else None
    arch = cuda_arch_area(facts.get("env") or {}, _visible_ccs(facts.get("gpu")),
                          active_tk.gpu_codes if active_tk else [], bool(python_cuda or libtorch_cuda),
                          _visible_gfx(facts.get("gpu")), active_tk.release if active_tk else None,
                          _torch_archs(facts))
    if arch is not None:
        areas.append(arch)

    env_area = pyenv_area(facts.get("pyenv"))
    if env_area is not None:
        areas.append(env_area)

    cxx = facts.get("libstdcxx")
    found = libstdcxx_findings(cxx)
    if found:
        areas.append(Area("libstdcxx", "C++ runtime", f"libstdc++ from {cxx.path}", [f"via {cxx.via}"], found))
    if facts.get("cuda_libs") is not None:
        from doctor.diagnose.cuda_libs import cuda_libs_area

        area = cuda_libs_area(facts["cuda_libs"])
        if area is not None:
            areas.append(area)
    return areas


def _torch_archs(facts: dict) -> tuple[str, ...]:
    """The architectures the Python torch's CUDA build carries, from the catalog (what
    cpp_extension clamps the GPUs to); () when the build or its row is unknown."""
    from doctor.catalog.cuda import arch_list

    python, system = facts.get("python_torch"), facts.get("system")
    if python is None or not (python.variant or "").startswith("cu"):
        return ()
    row = arch_list(python.variant, python.base_version, getattr(system, "machine", "x86_64") or "x86_64")
    return row.archs if row is not None and not row.assumed else ()


def _visible_ccs(gpu) -> list[str]:
    """Compute capabilities of the visible NVIDIA GPUs; tolerant of how the GPU facts are shaped."""
    nvidia = getattr(gpu, "nvidia", None)
    gpus = getattr(nvidia, "visible_gpus", None) or []
    return [cc for g in gpus if isinstance(cc := getattr(g, "compute_capability", None), str)
            and re.fullmatch(r"\d{1,2}\.\d", cc)]  # what a driver reports; anything else is not compared


def _visible_gfx(gpu) -> list[str]:
    import json
    import re

    from doctor.model import to_jsonable

    amd = getattr(gpu, "amd", None)
    if amd is None or not getattr(amd, "usable", False):
        return []
    return sorted(set(re.findall(r"\bgfx[0-9a-f]{3,4}\b", json.dumps(to_jsonable(amd)))))


def binary_check(host: Host, path: str, facts: dict):
    """`--binary PATH`: (facts, area)."""
    from doctor.diagnose.binary import binary_area
    from doctor.probe.binary import inspect_binary
    from doctor.probe.loader import read_ld_cache

    from doctor.diagnose.common import not_a_file
    from doctor.errors import UsageError

    kind = host.path_kind(path)
    if kind != "file":
        raise UsageError(f"--binary {path}: {not_a_file(kind)}", "pass a built program, extension module or shared library")
    libtorch = facts.get("libtorch")
    active = libtorch.active_install if libtorch is not None else None
    binary = inspect_binary(host, path, read_ld_cache(host))
    return binary, binary_area(binary, active.abi if active is not None else None)
