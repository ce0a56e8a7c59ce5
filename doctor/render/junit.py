"""JUnit XML, the report format GitLab, Jenkins and Azure Pipelines all read.

One <testsuite> per report; in it one <testcase> per finding (classname `doctor.<command>.<area>`,
name `<id>` plus its subject) and one passing testcase for each area that has no findings, so
every check shows up. A failing finding (an error, or a warning under --strict) carries a
<failure> whose message is its title and whose text holds the detail, the fix and the evidence.
A finding that a policy ignored is <skipped> with the reason, so the ignore stays visible.
CI pages show these texts to people, so a long detail or evidence value is elided as in the text
report (doctor.quoting.elided); --json keeps it whole.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from doctor.model import Finding, Level, Report
from doctor.quoting import elided, for_terminal, valid_unicode
from doctor.render.text import message_lines

# XML 1.0 forbids these even when escaped; for_terminal shows every control character as its escape.
_INVALID_XML = re.compile("[\ufffe\uffff]")


def _clean(text: str) -> str:
    # A CI page shows these texts to people: control characters (ESC, DEL, C1's CSI) and the
    # bidirectional overrides as their escapes, as the text report shows them.
    return _INVALID_XML.sub("\ufffd", for_terminal(text))


def _failed(f: Finding, strict: bool) -> bool:
    limit = Level.WARNING if strict else Level.ERROR
    return f.level.rank >= limit.rank


LABELS = ("fix:", "evidence:", "docs:")  # the lines of a failure's text that the doctor starts


def _body(f: Finding) -> str:
    lines = [f"[{f.level.value}] {f.title}", *message_lines(f, LABELS)]
    lines.extend("evidence: " + elided(str(e).replace("\n", "\\n")) for e in f.evidence)
    lines.append(f"docs: {f.docs}")
    return _clean("\n".join(lines))


def build(report: Report) -> ET.Element:
    ignored = dict((report.extra.get("policy") or {}).get("ignored") or {})
    suites = ET.Element("testsuites", name=f"torch-doctor {report.command}")
    suite = ET.SubElement(suites, "testsuite", name=f"doctor.{report.command}")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="doctor_version", value=report.doctor_version)
    ET.SubElement(props, "property", name="strict", value=str(report.strict).lower())
    tests = failures = skipped = 0
    for area in report.areas:
        classname = f"doctor.{report.command}.{area.name}"
        if not area.findings:
            case = ET.SubElement(suite, "testcase", classname=classname, name=_clean(area.title), time="0")
            ET.SubElement(case, "system-out").text = _clean(
                "\n".join([f"{area.title}: {area.summary}", *map(elided, area.details)])
            )
            tests += 1
            continue
        for f in area.findings:
            name = f"{f.id} ({f.subject})" if f.subject else f.id
            case = ET.SubElement(suite, "testcase", classname=classname, name=_clean(name), time="0")
            tests += 1
            if _failed(f, report.strict):
                failure = ET.SubElement(case, "failure", message=_clean(f.title), type=f.id)
                failure.text = _body(f)
                failures += 1
            elif f.id in ignored and f.level is Level.INFO:
                ET.SubElement(case, "skipped", message=_clean(f"ignored by policy: {ignored[f.id]}"))
                skipped += 1
            else:
                ET.SubElement(case, "system-out").text = _body(f)
    for element in (suites, suite):
        element.set("tests", str(tests))
        element.set("failures", str(failures))
        element.set("errors", "0")
        element.set("skipped", str(skipped))
        element.set("time", "0")
    return suites


def render(report: Report, verbose: int = 0, color: bool = False) -> str:
    root = build(report)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + valid_unicode(ET.tostring(root, encoding="unicode"))
