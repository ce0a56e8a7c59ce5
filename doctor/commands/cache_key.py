"""`doctor cache-key`: a short, stable key for the libtorch a CI job needs, for caching its download.

    libtorch-2.13.0-cpu-cxx11-linux-x86_64-1a2b3c4d

The readable part names version, variant, ABI (Linux only) and platform. The 8 hex digits hash
those together with the archive's file name, the key format's version and any --salt, so that
a renamed upstream archive, a new key format or a deliberate cache bust never reuses an old
cache entry. What the flags leave out is resolved exactly as `doctor fetch-libtorch` resolves it
(its plan: the Python torch's version, this machine's platform and GPUs), so the key names the
tree that command would fetch with the same flags.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from doctor.catalog.releases import ABIS
from doctor.record import record

if TYPE_CHECKING:
    from doctor.host import Host

KEY_FORMAT = 1


@record(frozen=True)
class KeyParts:
    version: str
    variant: str
    abi: str | None  # None where there is no ABI choice (macOS, Windows)
    platform: str
    source: str  # "url" (an official zip) or "wheel" (a tree laid out from a torch wheel)
    file_name: str | None

    def key(self, salt: str = "") -> str:
        material = json.dumps({"format": KEY_FORMAT, "salt": salt, **asdict(self)}, sort_keys=True)
        digest = hashlib.sha256(material.encode()).hexdigest()[:8]
        readable = ["libtorch", self.version, self.variant, self.abi, self.platform,
                    "wheel" if self.source == "wheel" else None, digest]
        return "-".join(p for p in readable if p)


def resolve(host: Host, version: str | None = None, variant: str | None = None, abi: str | None = None,
            platform: str | None = None, from_wheel: bool = False, unlisted: bool = False) -> KeyParts:
    """The parts of the key: flags first, the fetch plan for the rest (UsageError when impossible)."""
    from doctor.errors import UsageError
    from doctor.fetch.plan import FetchRequest, resolve_plan

    # A key names a file; it downloads nothing, so the mirror ($DOCTOR_LIBTORCH_MIRROR, http
    # or not) plays no part: the key is the same from any mirror.
    request = FetchRequest(version=version, variant=variant or "auto", abi=abi, platform=platform,
                           from_wheel=from_wheel, unlisted=unlisted, no_lock=True, use_mirror=False)
    from doctor.commands.fetch import machine_gpu_facts

    plan = resolve_plan(host, request, gpu_facts=lambda: machine_gpu_facts(host))
    if plan.version is None:
        raise UsageError("a nightly has no stable key", "give --version")
    return KeyParts(plan.version, plan.variant, plan.abi, plan.platform, plan.source, plan.file_name)


@click.command("cache-key")
@click.option("--version", "version", metavar="V", help="libtorch version, e.g. 2.13.0 (default: as fetch-libtorch).")
@click.option("--variant", metavar="X", help="cpu, cuXYZ or rocmX.Y (default: as fetch-libtorch, from this machine's GPUs).")
@click.option("--abi", type=click.Choice(ABIS), help="Linux only (default: cxx11).")
@click.option("--platform", metavar="P", help="linux-x86_64, macos-arm64, windows-x86_64, ... (default: this machine).")
@click.option("--from-wheel", is_flag=True, help="The tree fetch-libtorch --from-wheel lays out from a torch wheel.")
@click.option("--unlisted", is_flag=True, help="A release newer than the doctor's table (as fetch-libtorch --unlisted).")
@click.option("--salt", default="", metavar="TEXT", help="Mixed into the hash: change it to start a fresh cache.")
@click.option("--json", "as_json", is_flag=True, help="Print the key and its parts as JSON.")
def command(version: str | None, variant: str | None, abi: str | None, platform: str | None, from_wheel: bool,
            unlisted: bool, salt: str, as_json: bool) -> int:
    """Print a short stable key for the libtorch a CI job needs (to key its download cache).

    \b
    GitHub Actions:
      echo "key=$(doctor cache-key --version 2.13.0 --variant cpu)" >> "$GITHUB_OUTPUT"
    """
    from doctor.host import Host

    parts = resolve(Host.from_system(), version, variant, abi, platform, from_wheel, unlisted)
    key = parts.key(salt)
    if as_json:
        from doctor.commands._output import print_result

        return print_result("cache-key", {"key": key, **asdict(parts), "salt": salt, "key_format": KEY_FORMAT})
    else:
        click.echo(key)
    return 0
