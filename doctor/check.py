"""`doctor check`: run the probes (concurrently), turn facts into areas, add requirements."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from doctor import __version__
from doctor.errors import DoctorError, reraise_out_of_resources
from doctor.host import Host, result_of
from doctor.model import Area, Finding, Level, Report

ENV_KEYS = (
    "LIBTORCH", "LIBTORCH_INCLUDE", "LIBTORCH_LIB", "LIBTORCH_CXX11_ABI", "LIBTORCH_USE_PYTORCH",
    "LIBTORCH_HOME", "LIBTORCH_VERSION", "LIBTORCH_CUDA_VERSION", "LIBTORCH_SKIP_DOWNLOAD",
    "LIBTORCH_STATIC", "LIBTORCH_BYPASS_VERSION_CHECK", "TORCH_CUDA_VERSION",
    "Torch_DIR", "CMAKE_PREFIX_PATH", "CPATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH",
    "LD_LIBRARY_PATH", "LD_PRELOAD", "DYLD_LIBRARY_PATH", "CXX", "CXXFLAGS", "CPPFLAGS", "CONDA_PREFIX",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "CUDA_HOME", "DOCTOR_GPU_BACKEND",
    "DOCTOR_CUDA_DRIVER_VERSION", "DOCTOR_PROBE_TIMEOUT",
    # the CUDA stack (issue 13): toolkit, nvcc's host compiler, arch lists, allocator/loader knobs
    "CUDA_PATH", "CUDAHOSTCXX", "NVCC_CCBIN", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CC",
    "TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_MODULE_LOADING",
)


def gather_facts(host: Host, backend: str | None = None, cargo_lock: str | None = None) -> dict:
    """Every probe, independent ones in parallel. Keys are the JSON `facts` sections."""
    from doctor.probe.libtorch import detect_libtorch, libtorch_home
    from doctor.probe.loader import detect_loader, read_ld_cache
    from doctor.probe.python_torch import detect_python_torch
    from doctor.probe.system import detect_system
    from doctor.probe.toolchain import detect_toolchain

    def torch_and_libtorch():
        python = detect_python_torch(host)
        return python, detect_libtorch(host, python)

    from doctor.cuda_stack_check import start_cuda_stack

    ld_cache = read_ld_cache(host)
    # Every probe that runs commands starts first (the interpreter probe, nvcc, compilers: the
    # critical path, issue 19); the file-reading probes run in this thread meanwhile.
    with ThreadPoolExecutor(max_workers=6) as pool:
        cuda_stack = start_cuda_stack(pool, host)
        gpu = pool.submit(_detect_gpus, host, ld_cache)
        toolchain = pool.submit(detect_toolchain, host)
        system = pool.submit(detect_system, host, ld_cache, str(libtorch_home(host)))
        python, libtorch = torch_and_libtorch()
        active = libtorch.active_install
        loader = detect_loader(host, active.lib_dir if active and active.exists else None, ld_cache)
        gpu_facts, gpu_error = _guarded(gpu)
        if gpu_facts is not None:
            gpu_error = _guarded_call(finish_gpu_facts, host, gpu_facts, python, libtorch, ld_cache, backend)
            gpu_facts = None if gpu_error else gpu_facts
        facts = {
            "system": result_of(system),
            "python_torch": python,
            "libtorch": libtorch,
            "loader": loader,
            "toolchain": result_of(toolchain),
            "gpu": gpu_facts,
            "env": {k: host.env[k] for k in ENV_KEYS if k in host.env},
        }
        if gpu_error:
            facts["gpu_error"] = gpu_error
        facts.update(_client_facts(host, python, libtorch, cargo_lock))  # issue 18: tch-rs, Hasktorch
        facts.update(_cuda_stack_facts(host, ld_cache, libtorch, python, cuda_stack))  # issue 13: doctor/cuda_stack_check.py
        facts["platform_tree"] = _platform_tree_facts(host, active)  # issue 14: macOS / Windows trees
        return facts


def _platform_tree_facts(host: Host, active):
    from doctor.probe.platform_tree import detect_platform_tree

    if active is None or not active.exists:
        return None
    apple = None
    if host.system == "Darwin":
        from doctor.probe.apple import detect_apple

        apple = detect_apple(host, 5.0)
    return detect_platform_tree(host, active.lib_dir, apple)


def _guarded(future) -> tuple[object, str | None]:
    """The GPU probes talk to drivers and vendor tools in many states; a bug there costs the GPU
    area (a probe.failed warning), not the libtorch report people came for."""
    try:
        return result_of(future), None
    except DoctorError:  # bad user input (an override variable): the one-line error, not a "bug"
        raise
    except Exception as exc:
        reraise_out_of_resources(exc)
        return None, f"{type(exc).__name__}: {exc}"


def _guarded_call(fn, *args) -> str | None:
    """As _guarded, for a step run in this thread: the error text, or None."""
    try:
        fn(*args)
    except DoctorError:
        raise
    except Exception as exc:
        reraise_out_of_resources(exc)
        return f"{type(exc).__name__}: {exc}"
    return None


def _detect_gpus(host: Host, ld_cache: dict[str, list[str]]):
    from doctor.probe.gpu import detect_gpus

    return detect_gpus(host, ld_cache=ld_cache)


def finish_gpu_facts(host: Host, gpu, python, libtorch, ld_cache: dict[str, list[str]], backend: str | None = None) -> None:
    """Once GPUs and torch builds are known: read each build's GPU libraries (a probe), then
    compute the recommended variant (a pure function of those facts) into `gpu.recommended`."""
    from doctor.catalog.recommend import BACKEND_ENV, chosen_backend, recommend
    from doctor.probe.gpu import detect_gpu_builds

    gpu.builds = detect_gpu_builds(host, libtorch, python, ld_cache)
    gpu.recommended = recommend(gpu, host.system, host.machine, python=python,
                                backend=chosen_backend(backend, host.env.get(BACKEND_ENV)))


def gpu_report(host: Host, backend: str | None = None):
    """Only the GPU part of `check`, as it runs there: (gpu facts, python torch, libtorch, GPU area).
    For scripts/gpu-check and the GPU tests."""
    from doctor.diagnose.gpu import Platform, gpu_area
    from doctor.probe.gpu import detect_gpus
    from doctor.probe.libtorch import detect_libtorch
    from doctor.probe.loader import read_ld_cache
    from doctor.probe.python_torch import detect_python_torch

    ld_cache = read_ld_cache(host) if host.system == "Linux" else {}
    gpu = detect_gpus(host, ld_cache=ld_cache)
    python = detect_python_torch(host)
    libtorch = detect_libtorch(host, python)
    finish_gpu_facts(host, gpu, python, libtorch, ld_cache, backend)
    return gpu, python, libtorch, gpu_area(gpu, libtorch, python, Platform(host.system, host.machine))


def build_areas(facts: dict, host: Host) -> list[Area]:
    from doctor.diagnose.libtorch import libtorch_area
    from doctor.diagnose.loader import loader_area
    from doctor.diagnose.system import python_torch_area, system_area
    from doctor.diagnose.toolchain import toolchain_area

    libtorch = facts["libtorch"]
    areas = [
        system_area(facts["system"]),
        python_torch_area(facts["python_torch"], host.python),
        libtorch_area(libtorch, facts["python_torch"], facts["system"]),
        loader_area(facts["loader"]),
        toolchain_area(facts["toolchain"], libtorch.active_install),
    ]
    from doctor.cuda_stack_check import cuda_stack_areas

    areas.extend(cuda_stack_areas(facts))
    from doctor.diagnose.platform_tree import platform_area

    platform = platform_area(facts.get("platform_tree"))
    if platform is not None:
        areas.append(platform)

    from doctor.diagnose.clients import clients_area

    clients = clients_area(facts.get("tch"), _tch_tree(facts), facts.get("hasktorch"),
                           facts.get("stale_builds", []), facts.get("tch_relevant", False))
    if clients is not None:
        areas.append(clients)
    if facts["gpu"] is not None:
        from doctor.diagnose.gpu import Platform, gpu_area

        areas.append(gpu_area(facts["gpu"], libtorch, facts["python_torch"], Platform(host.system, host.machine)))
    else:
        failed = Finding("probe.failed", Level.WARNING, f"the GPU probe failed: {facts.get('gpu_error')}",
                         detail="This is a bug in torch-doctor; the rest of the report stands.",
                         fix="please report it with `doctor check --json`", area="gpu")
        areas.append(Area("gpu", "GPU", "could not be determined", findings=[failed]))
    return areas


def requirements_area(requirements: Sequence, facts: dict) -> Area:
    from doctor.requirements import evaluate

    findings = [f for f in (evaluate(r, facts) for r in requirements) if f is not None]
    met = len(requirements) - len(findings)
    details = [f"{'✗' if any(f.subject == r.text for f in findings) else '✓'} {r.text}" for r in requirements]
    return Area("requirements", "Requirements", f"{met} of {len(requirements)} met", details, findings)


def _flag_truncated_output(host: Host, areas: list[Area]) -> list[Area]:
    """A verdict read from a cut output may be wrong: say which commands printed too much."""
    import dataclasses

    if not host.truncated or not areas:
        return areas
    findings = [
        Finding("probe.failed", Level.WARNING, f"output truncated: `{command}` printed more than "
                f"{host.output_limit // 1024} KiB; only the start was read",
                detail="Facts read from this command may be incomplete.",
                fix=f"run `{command}` yourself and look at what it prints", area=areas[0].name, subject=command)
        for command in sorted(set(host.truncated))
    ]
    return [dataclasses.replace(areas[0], findings=[*areas[0].findings, *findings]), *areas[1:]]


def _client_facts(host: Host, python, libtorch, cargo_lock: str | None = None) -> dict:
    """How tch-rs and Hasktorch would resolve libtorch here, and stale build folders."""
    from doctor.probe.client_builds import stale_builds, stale_cabal_builds
    from doctor.probe.hasktorch_cache import hasktorch_request
    from doctor.probe.tchrs import relevant, resolve_tch

    tch = resolve_tch(host, python, cargo_lock)
    active = libtorch.active_install
    lib_dir = active.lib_dir if active and active.exists else None
    cuda = bool(active and any("cuda" in n for n in active.libraries))
    return {
        "tch": tch,
        "tch_relevant": relevant(host, tch),
        "hasktorch": hasktorch_request(host),
        "stale_builds": [*stale_builds(host, lib_dir, cuda), *stale_cabal_builds(host, lib_dir, cuda)],
    }


def _tch_tree(facts: dict):
    """The libtorch candidate whose lib dir tch-rs would link, for its ABI and version."""
    tch = facts.get("tch")
    if tch is None or not tch.lib_dir:
        return None
    return next((c for c in facts["libtorch"].candidates if c.lib_dir == tch.lib_dir), None)


def _cuda_stack_facts(host: Host, ld_cache: dict[str, list[str]], libtorch, python, started=None) -> dict:
    from doctor.cuda_stack_check import gather_cuda_stack

    return gather_cuda_stack(host, ld_cache, libtorch, python, started)


def run_check(host: Host, requirements: Sequence = (), strict: bool = False, policy=None,
              build: str | None = None, backend: str | None = None, binary: str | None = None,
              cargo_lock: str | None = None) -> Report:
    facts = gather_facts(host, backend, cargo_lock)
    areas = build_areas(facts, host)
    if binary:
        from doctor.cuda_stack_check import binary_check

        facts["binary"], area = binary_check(host, binary, facts)
        areas.append(area)
    if build:
        from doctor.buildcheck import build_check

        areas.append(build_check(host, facts["libtorch"].active_install, build).area())
    if requirements:
        areas.append(requirements_area(requirements, facts))
    areas = _flag_truncated_output(host, areas)
    report = Report("check", facts, areas, doctor_version=__version__, strict=strict)
    if policy is not None:
        from doctor.policy import apply_policy

        report = apply_policy(report, policy)
    return report


def load_policy(host: Host, doctor_version: str | None = None):
    """The policy of the project in `host.cwd` (doctor/policy.py), or None when it has none.

    The files are read here, through the Host; doctor.policy only parses their text."""
    from pathlib import PurePath

    from doctor.policy import FILES, PolicyFile, policy_from_files

    files = []
    for name in FILES:
        path = PurePath(host.cwd) / name
        text = host.read_text(path)
        regular = text is None and host.is_regular(path)
        irregular = text is None and not regular and host.exists(path)
        files.append(PolicyFile(str(path), name, text, irregular, unreadable=regular))
    return policy_from_files(files, doctor_version)
