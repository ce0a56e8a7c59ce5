"""Threat: text from outside (a log line, a path, a version file) printed by `--format github`
becomes a workflow command — `::set-env`, `::add-mask`, `::add-path`, an annotation, the v1
`##[…]` form — or ends the doctor's own annotation early.

The output is read by a port of the runner's command processing (actions/runner:
src/Runner.Common/ActionCommand.cs TryParseV2 / TryParse, and the stop-commands handling of
src/Runner.Worker/ActionCommandManager.cs); lines end where .NET's StreamReader.ReadLine ends them.
"""

from __future__ import annotations

import re

from doctor.model import Area, Evidence, Finding, Level, Report
from doctor.commands._output import write_step_summary
from doctor.host import Host
from doctor.render import github

REGISTERED = {"add-mask", "add-path", "set-env", "set-output", "save-state", "error", "warning", "notice", "debug",
              "group", "endgroup", "echo", "stop-commands", "add-matcher", "remove-matcher"}
DATA = [("\r", "%0D"), ("\n", "%0A"), ("%", "%25")]
PROPERTY = [("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25")]
V1 = [(";", "%3B"), ("\r", "%0D"), ("\n", "%0A"), ("]", "%5D"), ("%", "%25")]


def unescape(text: str, mappings) -> str:
    for token, replacement in mappings:  # the runner's order, one Replace after another
        text = text.replace(replacement, token)
    return text


def parse_v2(message: str, registered: set[str]):
    message = message.lstrip()
    if not message.startswith("::"):
        return None
    end = message.find("::", 2)
    if end < 0:
        return None
    info = message[2:end]
    name = info.split(" ", 1)[0]
    if name not in registered:
        return None
    props = {}
    if " " in info:
        for prop in (p for p in info.split(" ", 1)[1].strip().split(",") if p):
            pair = [x for x in prop.split("=", 1) if x]
            if len(pair) == 2:
                props[pair[0].lower()] = unescape(pair[1], PROPERTY)
    return name, props, unescape(message[end + 2:], DATA)


def parse_v1(message: str, registered: set[str]):
    start = message.find("##[")
    if start < 0:
        return None
    rb = message.find("]", start)
    if rb < 0:
        return None
    info = message[start + 3:rb]
    name = info.split(" ", 1)[0]
    if name not in registered:
        return None
    return name, {}, unescape(message[rb + 1:], V1)


def obeyed(output: str) -> list[tuple[str, dict, str]]:
    """The commands the runner acts on, in order."""
    registered = set(REGISTERED)
    stop_token = None
    done = []
    for line in re.split(r"\r\n|\r|\n", output):
        command = parse_v2(line, registered) or parse_v1(line, registered)
        if command is None:
            continue
        name = command[0]
        if stop_token is not None:
            if name == stop_token:
                registered.discard(stop_token)
                stop_token = None
                done.append(command)
            continue
        if name == "stop-commands":
            stop_token = command[2]
            registered.add(stop_token)
        done.append(command)
    return done


HOSTILE = ("libc10.so: cannot open\n::set-env name=LD_PRELOAD::/tmp/evil.so\r::add-mask::x\r\n"
           "  ::warning::indented ##[add-path]/evil 100%0A::error::x, title=y: z %25 ::")


def hostile_report() -> Report:
    error = Finding("loader.library-not-found", Level.ERROR, "cannot find " + HOSTILE, detail=HOSTILE,
                    fix="export LD_LIBRARY_PATH='/x'" + HOSTILE, area="loader",
                    evidence=[Evidence("log", "build.log:1", HOSTILE)], subject=HOSTILE)
    warning = Finding("abi.mismatch", Level.WARNING, "abi, mismatch: " + HOSTILE, detail=HOSTILE, area="loader")
    area = Area("loader", "Loader " + HOSTILE, HOSTILE, findings=[error, warning])
    return Report("explain", {}, [area])


def test_outside_text_becomes_no_command_and_annotations_carry_it_exactly(tmp_path):
    report = hostile_report()
    out = github.render(report, verbose=2)
    assert write_step_summary(Host(env={"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}), report, 2) == ""
    commands = obeyed(out)
    names = [c[0] for c in commands]
    token = commands[0][2]
    assert names == ["stop-commands", token, "error", "warning"], names
    assert len(token) >= 32 and f"::{token}::" in out
    (_, eprops, edata), (_, wprops, wdata) = commands[2], commands[3]
    assert eprops == {"title": f"cannot find {HOSTILE} [loader.library-not-found]"}
    assert wprops == {"title": f"abi, mismatch: {HOSTILE} [abi.mismatch]"}
    assert edata.startswith(HOSTILE.strip() + "\nfix: export LD_LIBRARY_PATH='/x'" + HOSTILE.rstrip())
    assert wdata.startswith(HOSTILE.strip())
    summary = (tmp_path / "summary.md").read_text()
    assert "torch-doctor explain" in summary and "<script" not in summary


def test_a_full_step_summary_stays_under_githubs_limit(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("x" * (github.SUMMARY_LIMIT - 300))
    assert write_step_summary(Host(env={"GITHUB_STEP_SUMMARY": str(path)}), hostile_report(), 2) == ""
    text = path.read_text()
    assert len(text.encode()) <= github.SUMMARY_LIMIT and "128 KiB" in text


def test_the_port_obeys_what_it_should():
    # The reader is not vacuous: unguarded lines are commands, v1 anywhere in a line too.
    assert [c[0] for c in obeyed("x\n ::set-env name=A::1\nlog ##[add-path]/p\n::nope::x")] == ["set-env", "add-path"]
