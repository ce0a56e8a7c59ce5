"""Apple: Apple silicon or Intel, Rosetta, the macOS version, and whether MPS can be used.

Rosetta makes an x86_64 Python report `x86_64` on Apple silicon, so the machine name alone
misleads: `sysctl -n sysctl.proc_translated` says 1 when translated. `platform.mac_ver()` can
say 10.16 (an old SDK's compatibility answer), so the version comes from `sw_vers`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import field

from doctor.catalog.cuda import MPS_MIN_MACOS, compare_versions
from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.devices import ProbeProblem, why_failed
from doctor.record import record

# Raw states that keep MPS out of reach (AppleFacts.mps_blockers).
MPS_BLOCKERS: tuple[str, ...] = ("not-apple-silicon", "silicon-unknown", "rosetta", "macos-too-old")


@record
class AppleFacts:
    """The Mac as torch sees it: Apple silicon or Intel, Rosetta, the macOS version, MPS."""
    machine: str  # what this Python reports: "arm64" or "x86_64"
    apple_silicon: bool | None  # None when it could not be told
    rosetta: bool  # this process runs translated
    macos_version: str | None
    mps_eligible: bool
    mps_blockers: list[str] = field(default_factory=list)  # MPS_BLOCKERS that apply; words in doctor/diagnose/gpu_states.py
    problems: list[ProbeProblem] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


def parse_sysctl_flag(text: str) -> bool | None:
    value = text.strip()
    return {"1": True, "0": False}.get(value)


def detect_apple(host: Host, timeout: float) -> AppleFacts | None:
    if host.system != "Darwin":
        return None
    native_arm = host.machine == "arm64"
    commands = {"version": ["sw_vers", "-productVersion"]}
    if not native_arm:
        commands["translated"] = ["sysctl", "-n", "sysctl.proc_translated"]
        commands["arm64"] = ["sysctl", "-n", "hw.optional.arm64"]
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {k: pool.submit(host.run, argv, timeout) for k, argv in commands.items()}
        results = {k: f.result() for k, f in futures.items()}
    facts = AppleFacts(host.machine, True if native_arm else None, False, None, False)
    for key, result in results.items():
        facts.evidence.append(Evidence("command", result.command, result.stdout.strip() or result.error or result.stderr.strip()))
        if result.timed_out:
            facts.problems.append(ProbeProblem(" ".join(result.argv), f"the Mac's {key}", why_failed(result), result.seconds))
    version = results["version"]
    if version.ok and version.stdout.strip():
        facts.macos_version = version.stdout.strip()
    if not native_arm:
        # On an Intel Mac the proc_translated key does not exist (sysctl fails): not translated.
        facts.rosetta = parse_sysctl_flag(results["translated"].stdout) is True
        arm = parse_sysctl_flag(results["arm64"].stdout)
        facts.apple_silicon = True if facts.rosetta else arm if arm is not None else (False if results["arm64"].returncode is not None else None)
    if not facts.apple_silicon:
        facts.mps_blockers.append("not-apple-silicon" if facts.apple_silicon is False else "silicon-unknown")
    elif facts.rosetta:
        facts.mps_blockers.append("rosetta")
    if facts.macos_version and compare_versions(facts.macos_version, MPS_MIN_MACOS) < 0:
        facts.mps_blockers.append("macos-too-old")
    facts.mps_eligible = bool(facts.apple_silicon) and not facts.rosetta and not facts.mps_blockers
    return facts
