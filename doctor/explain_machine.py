"""The command-layer side of `explain`: gather this machine's facts through the Host (probes,
file look-ups) and hand them, as plain values, to the pure doctor.explain."""

from __future__ import annotations

import dataclasses

from doctor.explain.facts import ENV_NAMES, LibtorchFacts, MachineFacts
from doctor.host import Host
from doctor.model import Finding


def libtorch_facts(install) -> LibtorchFacts | None:
    """A probed doctor.probe.libtorch.LibtorchInstall as plain facts; None when there is none on disk."""
    if install is None or not getattr(install, "exists", False):
        return None
    return LibtorchFacts(
        root=str(install.root), label=install.label, lib_dir=str(install.lib_dir),
        include_dirs=tuple(str(d) for d in install.include_dirs), version=install.version, variant=install.variant,
        abi=install.abi, abi_source=install.abi_source, cxx_standard=install.cxx_standard,
        cxx_standard_source=install.cxx_standard_source, elf_machine=install.elf_machine,
    )


def machine_facts(host: Host, install=None) -> MachineFacts:
    """This machine's facts with the given libtorch install (or none)."""
    env = {k: host.env[k] for k in ENV_NAMES if k in host.env}
    return MachineFacts(libtorch_facts(install), host.system, host.machine, host.glibc, env)


def detect(host: Host) -> MachineFacts:
    """This machine's facts with the active libtorch as `doctor check` would pick it."""
    from doctor.probe.libtorch import detect_libtorch
    from doctor.probe.python_torch import detect_python_torch

    return machine_facts(host, detect_libtorch(host, detect_python_torch(host)).active_install)


def explain_on(host: Host, text: str | bytes, facts: MachineFacts | None, source: str = "log") -> list[Finding]:
    """Explain `text` with `facts`, after looking up on `host` the files the advice names."""
    from doctor.explain import find, findings, lookups

    matches = find(text, facts, cpus=host.usable_cpus())
    if facts is not None:
        paths = [p for m in matches for p in lookups(m, facts)]
        present = frozenset(p for p in paths if host.exists(p))
        facts = dataclasses.replace(facts, looked=facts.looked | frozenset(paths), present=facts.present | present)
    return findings(matches, facts, source)
