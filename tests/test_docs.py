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


def test_every_finding_id_has_a_docs_page():
    ids = emitted_ids()
    assert {"libtorch.not-found", "libtorch.path-invalid", "requirement.unmet"} <= ids
    missing = sorted(i for i in ids if not (REPO / "docs/findings" / f"{i}.md").is_file())
    assert not missing, f"no docs/findings/<id>.md for: {missing}"


def test_findings_index_lists_every_page():
    index = (REPO / "docs/findings/index.md").read_text()
    pages = sorted(p.stem for p in (REPO / "docs/findings").glob("*.md") if p.stem != "index")
    assert [p for p in pages if f"({p}.md)" not in index] == []


def test_readme_names_the_two_setup_commands_and_ci_calls_the_test_one():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme.split("## A short tour")[0], re.S)
    assert [b.strip() for b in blocks] == ["pip install . && doctor check", "scripts/test"]
    assert "scripts/test" in (REPO / ".ci/run").read_text()
