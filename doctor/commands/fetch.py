"""`doctor fetch-libtorch`: resolve, download, verify, unpack and install the matching libtorch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from doctor.catalog.releases import ABIS, CHANNELS, PLATFORMS
from doctor.emit import FORMATS
from doctor.commands._output import Seconds
from doctor.commands._say import say
from doctor.quoting import for_terminal, sh_paste

if TYPE_CHECKING:
    from doctor.fetch.pipeline import Outcome
    from doctor.fetch.plan import Plan
    from doctor.host import Host
    from doctor.probe.gpu import GpuFacts

EPILOG = """\b
Examples:
  doctor fetch-libtorch                         # the libtorch matching this machine
  doctor fetch-libtorch --version 2.6.0 --abi pre-cxx11 --variant cu124
  doctor fetch-libtorch --from-wheel            # from the torch wheel (Linux aarch64)
  doctor fetch-libtorch --dry-run --json        # show the plan only
  eval "$(doctor fetch-libtorch --emit setenv)" # fetch, then set up this shell
"""

@click.command(name="fetch-libtorch", epilog=EPILOG)
@click.option("--version", "version", metavar="X.Y.Z",
              help="libtorch release (default: the installed Python torch's, else the newest known).")
@click.option("--variant", default="auto", show_default=True, metavar="auto|cpu|cuXYZ|rocmX.Y",
              help="Build flavour; auto = the one recommended for this machine's GPUs and driver.")
@click.option("--abi", type=click.Choice(ABIS), default=None,
              help="Linux C++ ABI (default cxx11; pre-cxx11 exists only up to 2.6).")
@click.option("--platform", type=click.Choice(PLATFORMS), default=None, help="Target platform (default: this machine).")
@click.option("--debug", is_flag=True, help="Windows debug build.")
@click.option("--channel", type=click.Choice(CHANNELS), default="release", show_default=True,
              help="test = release candidates, nightly = the latest nightly build.")
@click.option("--url", help="Fetch this zip instead of the official one (the table is not consulted).")
@click.option("--archive", type=click.Path(dir_okay=False, path_type=Path), help="Install a zip already on disk.")
@click.option("--from-wheel", is_flag=True,
              help="Build the tree from the torch wheel (`pip download torch==V`, honouring pip's configuration).")
@click.option("--index-url", metavar="URL", help="With --from-wheel: pip's index (e.g. https://download.pytorch.org/whl/cu130).")
@click.option("--mirror", metavar="URL",
              help="Base URL replacing https://download.pytorch.org/libtorch (also $DOCTOR_LIBTORCH_MIRROR).")
@click.option("--unlisted", is_flag=True, help="Allow a version the release table does not list (URL from the naming rules).")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path),
              help="Install here (default: $LIBTORCH_HOME/<version>/<platform>/<variant>, Hasktorch's layout).")
@click.option("--sha256", metavar="HEX", help="Expected sha256 of the archive.")
@click.option("--lock", "lock", type=click.Path(dir_okay=False, path_type=Path),
              help="Lock file recording hashes on first fetch (default: ./libtorch.lock).")
@click.option("--no-lock", is_flag=True, help="Neither read nor write a lock file.")
@click.option("--update-lock", is_flag=True, help="Re-record the lock entry instead of checking against it.")
@click.option("--force", is_flag=True, help="Fetch and replace even when already installed; also replace a libtorch "
              "tree the doctor did not install (never a directory holding anything else).")
@click.option("--verify", "verify_tree", is_flag=True, help="Re-hash the installed tree and check it against its install record and the lock; never downloads or replaces (nothing installed there: exit 1).")
@click.option("--offline", is_flag=True, help="Never download: succeed only if already installed (or with --archive).")
@click.option("--keep-archive", is_flag=True, help="Keep the downloaded zip beside the destination.")
@click.option("--allow-http", is_flag=True, help="Allow plain http:// URLs (a trusted local mirror).")
@click.option("--retries", type=click.IntRange(0, 100), default=5, show_default=True,
              help="Retries after 5xx answers or connection errors.")
@click.option("--timeout", type=Seconds(0.1, 3600), default=60.0, show_default=True,
              help="Seconds without data before a connection counts as failed.")
@click.option("--backoff", type=Seconds(0, 60), default=1.0, hidden=True,
              help="First retry delay in seconds (doubles each time).")
@click.option("--dry-run", is_flag=True, help="Print the plan (URL, file, ABI, destination) and stop.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan or result as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--emit", "emit_fmt", type=click.Choice(list(FORMATS)),
              default=None, help="After installing, print this environment (doctor emit FORMAT) on stdout; "
              "everything else goes to stderr.")
def command(version, variant, abi, platform, debug, channel, url, archive, from_wheel, index_url, mirror,
            unlisted, dest, sha256, lock, no_lock, update_lock, force, verify_tree, offline, keep_archive,
            allow_http, retries, timeout, backoff, dry_run, as_json, quiet, emit_fmt=None) -> int:
    """Download, verify and install the libtorch that matches this machine."""
    from doctor.errors import UsageError
    from doctor.fetch.pipeline import FetchOptions, fetch
    from doctor.fetch.plan import FetchRequest, resolve_plan
    from doctor.host import Host

    if emit_fmt and (as_json or dry_run):
        raise UsageError("--emit prints an environment; it does not combine with --json or --dry-run")
    if no_lock and (lock or update_lock):
        raise UsageError("--no-lock does not combine with --lock or --update-lock")
    # A quoted ~ (`--dest '~/lt'`) means the home folder, as in `emit --libtorch`: taken as it is,
    # it made a folder named ~ in the current directory (and `rm -rf ~` is how people remove it).
    dest, lock, archive = (p.expanduser() if p is not None else None for p in (dest, lock, archive))
    host = Host.from_system()
    req = FetchRequest(version=version, variant=variant, abi=abi, platform=platform, debug=debug, channel=channel,
                       url=url, archive=archive, from_wheel=from_wheel, index_url=index_url, mirror=mirror,
                       unlisted=unlisted, dest=dest, sha256=sha256, lock=lock, no_lock=no_lock,
                       allow_http=allow_http)
    plan = resolve_plan(host, req, gpu_facts=lambda: machine_gpu_facts(host))
    if dry_run:
        if as_json:
            from doctor.commands._output import print_result

            return print_result("fetch-libtorch", {"action": "dry-run", "plan": plan.describe()})
        else:
            click.echo(for_terminal(_plan_text(plan)))
        return 0

    def log(line: str) -> None:
        if not quiet:
            say(line)

    if not verify_tree and host.noexec(plan.dest):
        say(f"note: {plan.dest} is on a file system mounted noexec: the tree installs, but no program will be able "
            "to load its libraries ('failed to map segment from shared object'); choose another --dest or LIBTORCH_HOME")
    on_behalf = host.sudo_user()
    if on_behalf and not verify_tree:
        from doctor.fetch.sudo import sudo_note

        note = sudo_note(*on_behalf, plan.dest)
        if note:
            say(note)
    opts = FetchOptions(force=force, verify_tree=verify_tree, offline=offline, update_lock=update_lock,
                        keep_archive=keep_archive, retries=retries, backoff=backoff, timeout=timeout)
    outcome = fetch(host, plan, opts, log)
    if as_json:
        from doctor.commands._output import print_result  # here: a plain fetch needs none of doctor.model

        return print_result("fetch-libtorch", {
            "action": outcome.action, "dest": str(outcome.dest), "lock": outcome.lock,
            "lock_file": str(plan.lock_path) if plan.lock_path else None,
            "seconds": round(outcome.seconds, 3), "plan": plan.describe(), "record": outcome.record})
    summary = _outcome_text(plan, outcome)
    if emit_fmt:
        from doctor.emit import emit_to, find_install

        say(summary, one_line=False)
        text, messages = emit_to(emit_fmt, host, find_install(host, outcome.dest))
        click.echo(text, nl=False)
        for line in messages:
            say(line)
        return 0
    click.echo(for_terminal(summary))
    return 0


def _label(record: dict) -> str:
    v = record.get("build_version") or f"{record.get('version')}+{record.get('variant')}"
    bits = [f"{record['abi']} ABI" if record.get("abi") else None, record.get("platform"),
            "debug" if record.get("debug") else None]
    return f"libtorch {v} ({', '.join(b for b in bits if b)})"


def _outcome_text(plan: Plan, outcome: Outcome) -> str:
    rec = outcome.record
    lines = []
    lock_line = None
    if plan.lock_path:
        lock_line = {"recorded": f"hashes recorded in {plan.lock_path} (trust on first use)",
                     "updated": f"entry updated in {plan.lock_path}",
                     "verified": f"matches {plan.lock_path}"}.get(outcome.lock or "", f"no entry in {plan.lock_path}")
    if outcome.action == "installed":
        lines.append(f"Installed {_label(rec)} in {outcome.seconds:.1f} s" + (" (replaced the previous tree)" if outcome.replaced else ""))
    elif outcome.action == "verified":
        lines.append(f"{_label(rec)} at {outcome.dest}: re-hashed, matches its install record; nothing to do")
    else:
        how = "its install record" + (f" and {plan.lock_path}" if outcome.lock == "verified" else "")
        lines.append(f"{_label(rec)} is already installed (checked against {how}); nothing to do")
    lines.append(f"  at      {outcome.dest}")
    src = rec.get("source") or {}
    lines.append(f"  source  {src.get('url') or src.get('url_redacted') or src.get('path') or src.get('file')}")
    lines.append(f"  sha256  {rec.get('sha256')}")
    lines.append(f"  nar     {rec.get('nar_hash')}")
    if lock_line:
        lines.append(f"  lock    {lock_line}")
    lines.append(f'Next: eval "$(doctor emit setenv --libtorch {sh_paste(str(outcome.dest))})"')
    return _one_line_each(lines)


def _plan_text(plan: Plan) -> str:
    from doctor.fetch.names import redact_url

    d = plan.describe()
    rows = [("version", d["version"] or "(nightly: known once unpacked)"), ("variant", d["variant"]),
            ("ABI", d["abi"] or "n/a"), ("platform", d["platform"] + (" (debug)" if d["debug"] else "")),
            ("channel", d["channel"]), ("source", d["source"])]
    if d["url"]:
        rows.append(("URL", d["url"]))
    if d["file"]:
        rows.append(("file", d["file"]))
    if d["archive"]:
        rows.append(("archive", d["archive"]))
    if d["source"] == "wheel":
        rows.append(("pip", f"pip download torch=={d['version']} --no-deps" + (f" --index-url {redact_url(plan.index_url)}" if plan.index_url else "")))
    rows.append(("dest", d["dest"]))
    rows.append(("lock", f"{d['lock']} [{d['lock_key']}]" if d["lock"] else "none"))
    if d["sha256"]:
        rows.append(("sha256", d["sha256"]))
    out = ["Plan (dry run: nothing fetched)"] + [f"  {k:<9} {v}" for k, v in rows]
    for i, note in enumerate(d["notes"]):
        out.append(f"  {'why' if i == 0 else '':<9} {note}")
    return _one_line_each(out)


def _one_line_each(lines: list[str]) -> str:
    # Each line holds one value (a destination, a URL): a newline in it is shown as \n, so no
    # value adds a line of its own ("Next: curl … | sh") to what the doctor prints.
    return "\n".join(for_terminal(line, one_line=True) for line in lines)


def machine_gpu_facts(host: Host) -> GpuFacts:
    """This machine's GPU facts for `--variant auto` (the plan decides; the command layer probes)."""
    from doctor.probe.gpu import detect_gpus

    return detect_gpus(host)

