"""`doctor check`: detect, judge, report; exit 1 when a required check fails."""

from __future__ import annotations

import click

from doctor.commands._output import print_report, report_options


@click.command("check")
@click.option("--require", "requires", multiple=True, metavar="REQ",
              help="A requirement to enforce (repeatable): 'libtorch>=2.5,<2.10', 'torch==2.13.*', "
              "'abi=cxx11', 'variant=cu128', 'gpu', 'cuda'. Also read from [tool.doctor] in pyproject.toml.")
@click.option("--build", type=click.Choice(["c10", "full"]), is_flag=False, flag_value="c10", default=None,
              help="Also compile and run a tiny program against the active libtorch with only the environment "
              "`doctor emit` writes: a c10-only probe (about a second), or --build=full (<torch/torch.h> and a "
              "tensor op). A failed build is explained.")
@click.option("--backend", metavar="cpu|cuXYZ|rocmX.Y", default=None,
              help="Recommend this variant instead of detecting one (also DOCTOR_GPU_BACKEND).")
@click.option("--binary", metavar="PROGRAM_OR_LIB", default=None,
              help="Also inspect a built program, extension module or shared library: how its NEEDED libraries "
              "resolve, whether -Wl,--as-needed dropped libtorch_cuda, its std::string ABI and GLIBCXX needs "
              "against what the loader gives it, and symbols no library defines.")
@click.option("--python", "python", metavar="PATH", default=None,
              help="Inspect this interpreter's environment (a project's venv: its torch, nvidia-* packages and "
              "sys.path) instead of the doctor's own.")
@click.option("--libtorch", "libtorch", metavar="DIR", default=None,
              help="Check this libtorch tree (as if LIBTORCH=DIR). A macOS or Windows tree is checked from its "
              "Mach-O / PE files with that platform's loader simulated; what needs that machine is marked so.")
@click.option("--cargo-lock", "cargo_lock", type=click.Path(dir_okay=False), default=None,
              help="The Cargo.lock whose tch / torch-sys version to check against the libtorch tch-rs would "
              "link (default: ./Cargo.lock when present).")
@report_options
def command(requires: tuple[str, ...], build: str | None, backend: str | None, binary: str | None, python: str | None,
            libtorch: str | None, cargo_lock: str | None, fmt: str | None, as_json: bool, verbose: int, color: str,
            strict: bool) -> int:
    """Detect libtorch installs, the Python torch, the toolchain, the loader's view and GPUs.

    Says what is wrong, why (with evidence, see -v) and the exact fix. Exit codes: 0 every
    required check passes, 1 a check or requirement fails (warnings too with --strict),
    2 usage error, 3 the doctor crashed.
    """
    from doctor.check import run_check
    from doctor.host import Host
    from doctor.requirements import parse_requirement

    host = Host.from_system()
    if python:
        from doctor.probe.pyenv import interpreter_host

        host = interpreter_host(host, python)
    if libtorch is not None:
        host = _with_libtorch(host, libtorch)
    if backend:
        from doctor.catalog.recommend import validate_backend

        backend = validate_backend(backend, "--backend")
    policy = _load_policy(host)
    texts = [*getattr(policy, "requirements", ()), *requires]
    requirements = [parse_requirement(t) for t in texts]
    report = run_check(host, requirements, strict=strict, policy=policy, build=build, backend=backend, binary=binary,
                       cargo_lock=cargo_lock)
    return print_report(report, fmt, as_json, verbose, color)


def _with_libtorch(host, directory: str):
    import dataclasses

    from doctor.errors import UsageError

    if not host.is_dir(directory):
        raise UsageError(f"--libtorch {directory!r}: not a directory", "pass the root of a libtorch tree (it holds lib/ and include/)")
    return dataclasses.replace(host, env={**host.env, "LIBTORCH": str(host.real(directory))})


def _load_policy(host):
    import importlib.util

    if importlib.util.find_spec("doctor.policy") is None:
        return None
    from doctor.check import load_policy

    return load_policy(host)
