"""Resolve a fetch request (command-line options + this host's facts) into a Plan.

Nothing here touches the network or writes a file: `--dry-run` prints the Plan and stops.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from doctor import fixes
from doctor.catalog import releases
from doctor.diagnose.common import not_a_file
from doctor.errors import UsageError
from doctor.fetch.names import host_problem, redact_url, safe_component
from doctor.formats import clip
from doctor.host import Host
from doctor.probe.hasktorch_cache import libtorch_home, tree_path
from doctor.quoting import sh_paste
from doctor.record import record

MIRROR_ENV = "DOCTOR_LIBTORCH_MIRROR"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@record
class FetchRequest:
    """What the user asked for; None/"auto" mean "work it out"."""

    version: str | None = None
    variant: str = "auto"
    abi: str | None = None
    platform: str | None = None
    debug: bool = False
    channel: str = "release"
    url: str | None = None
    archive: Path | None = None
    from_wheel: bool = False
    index_url: str | None = None
    mirror: str | None = None
    unlisted: bool = False
    dest: Path | None = None
    sha256: str | None = None
    lock: Path | None = None
    no_lock: bool = False
    allow_http: bool = False
    use_mirror: bool = True  # False for `cache-key`: a key names the file, it downloads nothing


@record
class Plan:
    version: str | None  # "2.13.0"; None for a nightly until it is unpacked
    variant: str
    abi: str | None
    platform: str
    debug: bool
    channel: str
    source: str  # "url" | "archive" | "wheel"
    url: str | None
    file_name: str | None
    archive: Path | None
    dest: Path
    lock_path: Path | None
    sha256: str | None  # what the user promised with --sha256
    listed: bool = True
    index_url: str | None = None
    allow_http: bool = False
    notes: list[str] = field(default_factory=list)  # how each default was chosen

    @property
    def lock_key(self) -> str:
        parts = [self.version or "nightly", self.platform, self.variant, self.abi or "any"]
        if self.debug:
            parts.append("debug")
        if self.source == "wheel":
            parts.append("wheel")
        return "/".join(parts)

    def describe(self) -> dict:
        return {
            "version": self.version,
            "variant": self.variant,
            "abi": self.abi,
            "platform": self.platform,
            "debug": self.debug,
            "channel": self.channel,
            "source": self.source,
            "url": redact_url(self.url),
            "file": self.file_name,
            "archive": str(self.archive) if self.archive else None,
            "dest": str(self.dest),
            "lock": str(self.lock_path) if self.lock_path else None,
            "lock_key": self.lock_key if self.lock_path else None,
            "sha256": self.sha256,
            "listed": self.listed,
            "notes": list(self.notes),
        }


def default_dest(host: Host, version: str | None, platform: str, variant: str, abi: str | None, debug: bool) -> Path:
    # Hasktorch's layout $LIBTORCH_HOME/<version>/<platform>/<variant>. Builds Hasktorch cannot
    # use (the old ABI, Windows debug) get a suffixed directory so they never shadow the
    # default one a Hasktorch build picks up.
    leaf = variant + ("-pre-cxx11" if abi == "pre-cxx11" else "") + ("-debug" if debug else "")
    return Path(tree_path(libtorch_home(host), version or "nightly", platform, leaf))


def resolve_plan(host: Host, req: FetchRequest, gpu_facts: Callable[[], Any] | None = None) -> Plan:
    """`gpu_facts`: how the command layer gathers this machine's GPU facts (doctor.probe.gpu),
    called only when `--variant auto` needs them; without it, auto means cpu."""
    notes: list[str] = []
    if req.version is not None and not req.version.strip():  # `--version "$UNSET"` in a CI script
        raise UsageError("--version is empty", "give a release such as 2.13.0, or leave --version out for the default")
    if req.version and "+" in req.version:  # "2.13.0+cpu": the variant rides along
        version, local = req.version.strip().split("+", 1)
        if req.variant not in ("auto", local):
            raise UsageError(f"--version {req.version} names the variant {local}, but --variant is {req.variant}",
                             f"give one of them: --version {version} --variant {req.variant}, or --version {req.version}")
        req = dataclasses.replace(req, version=version, variant=local)
    sources = [s for s, on in (("--url", req.url), ("--archive", req.archive), ("--from-wheel", req.from_wheel)) if on]
    if len(sources) > 1:
        raise UsageError(f"{' and '.join(sources)} are alternative sources; give one")
    source = {"--url": "url", "--archive": "archive", "--from-wheel": "wheel"}.get(sources[0] if sources else "", "url")
    if req.mirror and (req.url or req.archive or req.from_wheel):
        raise UsageError("--mirror replaces the official download host; it does not combine with --url, --archive or --from-wheel")
    if req.channel != "release" and (req.url or req.archive or req.from_wheel):
        raise UsageError("--channel applies to the official download host only")
    if req.debug and req.from_wheel:
        raise UsageError("--debug builds come only as Windows zips, not wheels")

    if not req.platform and host.musl():
        raise UsageError("this machine's C library is musl: libtorch is built for glibc only, and no official build "
                         "runs here", f"{fixes.glibc_system()}; or give --platform to fetch for another machine")
    platform = req.platform or releases.host_platform(host.system, host.machine)
    if platform is None:
        raise UsageError(f"libtorch has no build for this machine ({host.system} {host.machine})",
                         f"give --platform ({', '.join(releases.PLATFORMS)}) to fetch for another one")
    releases.check_platform(platform)

    # What a URL's or archive's file name says, when it is an official name.
    name_facts = None
    file_name = None
    if req.url:
        _check_url(req.url, req.allow_http)
        # The last path segment, percent-decoded, names the file only when it is one plain
        # component: `..%2F..%2Fx` or `%2Ftmp%2Fx` must never become a path.
        file_name = safe_component(unquote(PurePosixPath(urlsplit(req.url).path).name), "libtorch.zip")
        name_facts = releases.parse_file_name(file_name)
    elif req.archive:
        file_name = Path(req.archive).name
        name_facts = releases.parse_file_name(file_name)
    if name_facts and not req.platform and name_facts.platform != platform:
        platform = name_facts.platform
        notes.append(f"platform {platform}: from the file name {file_name}")

    version = _version(host, req, name_facts, notes)
    variant = _variant(host, req, version, platform, name_facts, notes, gpu_facts)
    abi = req.abi
    if abi is None and name_facts is not None and name_facts.abi:
        abi = name_facts.abi
        notes.append(f"ABI {abi}: from the file name {file_name} (and version {name_facts.version})")
    if abi is not None and abi not in releases.ABIS:
        raise UsageError(f"unknown ABI {abi!r}; known: {', '.join(releases.ABIS)}")
    if not platform.startswith("linux"):
        if req.abi:
            raise UsageError(f"--abi applies to Linux only; {platform} has no CXX11 ABI choice")
        abi = None
    debug = req.debug or bool(name_facts and name_facts.debug)

    mirror = (req.mirror or host.env.get(MIRROR_ENV) or None) if req.use_mirror else None
    listed = True
    url = None
    if source == "url" and not req.url:
        base = mirror or releases.BASE_URL
        if mirror:
            _check_url(mirror, req.allow_http)
            notes.append(f"mirror {redact_url(mirror)}" + ("" if req.mirror else f" (from ${MIRROR_ENV})"))
        art = releases.resolve(version, variant, platform, abi, debug, req.channel, base, listed=not req.unlisted)
        url, file_name, abi, listed = art.url, art.file_name, art.abi, art.listed
        if not art.listed and req.channel == "release":
            notes.append(f"{version} is not in the release table: URL built from the current naming rules (--unlisted)")
    elif source == "url":
        url = req.url
        listed = False
        if platform.startswith("linux") and abi is None:
            abi = "cxx11"
            notes.append("ABI cxx11 assumed (the file name does not say); checked against the tree once unpacked")
    elif source == "archive":
        listed = False
        if not host.is_file(req.archive):
            kind = host.path_kind(req.archive)
            raise UsageError(f"--archive {req.archive}: {not_a_file(kind, 'a zip file')}",
                             "give --archive the path of a libtorch zip on disk")
        if platform.startswith("linux") and abi is None:
            abi = "cxx11"
    else:  # wheel
        releases.check_variant_form(variant)
        wheel_abi = None
        if platform.startswith("linux") and version:
            # Wheels moved to the CXX11 ABI with 2.7 (manylinux_2_28); before that they were pre-cxx11.
            wheel_abi = "cxx11" if releases.key(version)[:2] >= (2, 7) else "pre-cxx11"
        if abi is not None and wheel_abi is not None and abi != wheel_abi:
            raise UsageError(f"torch {version} wheels use the {wheel_abi} ABI; there is no {abi} wheel",
                             "fetch the official zip instead (drop --from-wheel)")
        abi = wheel_abi

    dest = Path(req.dest) if req.dest else default_dest(host, version, platform, variant, abi, debug)
    if not req.dest:
        given = host.env.get("LIBTORCH_HOME") or ""
        if given.startswith("~"):  # kept literal (quoted, or set where no shell expands it)
            meant = host.tilde_expanded(given)
            raise UsageError(f"LIBTORCH_HOME={clip(repr(given), 200)} keeps its ~ ({fixes.TILDE_RULE}): "
                             "the install would make a folder named ~ here",
                             f"export LIBTORCH_HOME={sh_paste(meant)}" if meant else "give LIBTORCH_HOME as an absolute folder",
                             error_id="env.bad-value")
        if dest.parts and dest.parts[0] == "~":  # no home to expand: a folder named ~ here would be made
            raise UsageError("no home folder to install under: HOME is unset and the user database names none",
                             "give --dest, or set LIBTORCH_HOME (or HOME)")
        notes.append("destination: Hasktorch's layout $LIBTORCH_HOME/<version>/<platform>/<variant>")
        if given and not dest.is_absolute():
            notes.append(f"LIBTORCH_HOME is relative: installed under {host.cwd / dest}; Hasktorch's Setup.hs would look "
                         "for it from libtorch-ffi's folder instead (export an absolute LIBTORCH_HOME)")
    lock_path = None
    if not req.no_lock:
        if req.channel == "nightly":
            notes.append("no lock entry for a nightly: its contents change every day")
        else:
            lock_path = Path(req.lock) if req.lock else host.cwd / "libtorch.lock"
    sha = None
    if req.sha256:
        sha = req.sha256.strip().lower()
        if not SHA256_RE.match(sha):
            raise UsageError(f"--sha256 {req.sha256!r} is not 64 hex digits")
    return Plan(version, variant, abi, platform, debug, req.channel, source, url, file_name,
                Path(req.archive) if req.archive else None, dest, lock_path, sha, listed,
                req.index_url, req.allow_http, notes)


def _check_url(url: str, allow_http: bool) -> None:
    shown = redact_url(url)
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise UsageError(f"{shown!r} holds spaces or control characters", "percent-encode them (%20, ...)")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise UsageError(f"{shown!r} is not a valid URL ({exc})", "check the URL's host and port") from exc
    scheme = parts.scheme.lower()
    if scheme in ("https", "http") and not parts.hostname:
        raise UsageError(f"{shown!r} names no host", "give a URL such as https://host/path/libtorch-….zip")
    problem = host_problem(parts.hostname) if scheme in ("https", "http") else None
    if problem:
        raise UsageError(f"{shown!r}: {problem}", "check the URL's host name (a doubled or stray dot?)")
    if scheme == "https":
        return
    if scheme == "http":
        if allow_http:
            return
        raise UsageError(f"refusing plain HTTP: {shown}", "use an https:// URL, or --allow-http for a trusted local mirror")
    if scheme == "file":
        raise UsageError(f"{shown}: for a file on disk use --archive PATH", "--archive installs a zip already on disk")
    raise UsageError(f"{shown!r} is not an http(s) URL", "give an https:// URL")


def _version(host: Host, req: FetchRequest, name_facts, notes: list[str]) -> str | None:
    if req.version:
        version = req.version.strip()
        if not releases.VERSION_RE.match(version):
            raise UsageError(f"--version {req.version!r}: expected MAJOR.MINOR.PATCH, e.g. {releases.newest_version()}")
        return version
    if name_facts is not None:
        notes.append(f"version {name_facts.version}: from the file name")
        return name_facts.version
    if req.url or req.archive:
        raise UsageError("cannot tell the libtorch version from that file name", "give --version (and --variant)")
    if req.channel == "nightly":
        return None
    from doctor.probe.python_torch import detect_python_torch

    torch = detect_python_torch(host)
    if torch is not None:
        from packaging.version import InvalidVersion, Version

        try:
            base = Version(torch.base_version).base_version
        except InvalidVersion:
            base = ""
        if releases.VERSION_RE.match(base) and (releases.is_listed(base) or req.unlisted or req.from_wheel):
            notes.append(f"version {base}: the installed Python torch is {torch.version}")
            return base
        notes.append(f"the installed Python torch {torch.version} is not a listed release; using the newest listed")
    newest = releases.newest_version()
    notes.append(f"version {newest}: the newest in the release table (no Python torch found)")
    return newest


def _variant(host: Host, req: FetchRequest, version: str | None, platform: str, name_facts, notes: list[str],
             gpu_facts: Callable[[], Any] | None) -> str:
    if req.variant and req.variant != "auto":
        releases.check_variant_form(req.variant)
        return req.variant
    if name_facts is not None:
        # The file name is outside input, and the variant becomes a directory name: only a
        # variant of the known form (never "..") is taken from it.
        releases.check_variant_form(name_facts.variant)
        return name_facts.variant
    if req.url or req.archive:
        raise UsageError("cannot tell the variant from that file name", "give --variant (cpu, cuXYZ, rocmX.Y)")
    if platform.startswith("macos"):
        notes.append("variant cpu: macOS builds are CPU-only (MPS is built in)")
        return "cpu"
    host_plat = releases.host_platform(host.system, host.machine)
    if platform != host_plat:
        notes.append(f"variant cpu: fetching for another platform ({platform}), so this machine's GPUs say nothing")
        return "cpu"
    from doctor.catalog.recommend import BACKEND_ENV, chosen_backend, recommend

    if gpu_facts is None:
        notes.append("variant cpu (auto): no GPU facts were gathered for this plan")
        return "cpu"
    rec = recommend(gpu_facts(), host.system, host.machine, version=version,
                    backend=chosen_backend(None, host.env.get(BACKEND_ENV)))
    notes.append(f"variant {rec.variant} (auto): " + ("; ".join(rec.reasons) or "recommended for this machine"))
    return rec.variant
