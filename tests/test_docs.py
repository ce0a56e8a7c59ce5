"""Docs stay current with the code: every finding id the code can emit has its page."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Finding("some.id", ...) or Finding(id="some.id", ...), and `"id": "some.id"` in data tables.
ID = re.compile(r"""(?:Finding\(\s*(?:id\s*=\s*)?|["']id["']\s*:\s*|\bid\s*=\s*)["']([a-z][a-z0-9]*\.[a-z0-9-]+)["']""")


def emitted_ids() -> set[str]:
    ids = set()
    for path in (REPO / "doctor").rglob("*.py"):
        ids.update(ID.findall(path.read_text()))
    return ids


def test_the_registry_and_the_docs_pages_are_the_same_ids():
    from doctor.findings import FINDINGS

    pages = {p.stem for p in (REPO / "docs/findings").glob("*.md") if p.stem != "index"}
    assert sorted(set(FINDINGS) - pages) == [], "registered ids without a docs/findings/<id>.md page"
    assert sorted(pages - set(FINDINGS)) == [], "docs pages of ids doctor/findings.py does not register"
    assert all(m and "\n" not in m for m in FINDINGS.values())


def test_every_id_the_code_spells_is_registered():
    # a cross-check on the sources: an id written in a Finding(...) that the registry lacks
    from doctor.findings import FINDINGS

    ids = emitted_ids()
    assert {"libtorch.not-found", "libtorch.path-invalid", "requirement.unmet"} <= ids
    assert sorted(ids - set(FINDINGS)) == []


def test_findings_index_is_the_registry():
    import subprocess
    import sys

    from doctor.findings import FINDINGS

    index = (REPO / "docs/findings/index.md").read_text()
    assert [i for i in FINDINGS if f"[{i}]({i}.md)" not in index] == []
    before = index
    subprocess.run([sys.executable, str(REPO / "scripts/findings-index")], check=True, timeout=60)
    assert (REPO / "docs/findings/index.md").read_text() == before, "run scripts/findings-index"


def test_readme_names_the_two_setup_commands_and_ci_calls_the_test_one():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme.split("## A short tour")[0], re.S)
    assert [b.strip() for b in blocks] == ["pip install . && doctor check", "scripts/test"]
    assert "scripts/test" in (REPO / ".ci/run").read_text()
