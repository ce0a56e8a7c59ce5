"""The fetch package's import shape: the NAR serialiser knows nothing of fetch (the old
`nar ⇄ fetch/extract` circle), stages never import the pipeline that runs them, and the
install record has one home."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "doctor"


def imports(path: Path) -> set[str]:
    """Every module `path` imports, at top level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_nar_imports_nothing_from_fetch():
    assert not [m for m in imports(PKG / "nar.py") if m.startswith("doctor.fetch")]


def test_stages_do_not_import_the_pipeline():
    for name in ("plan", "source", "download", "extract", "install", "record", "lock", "verify", "wheel",
                 "names", "fsops", "destination"):
        mods = imports(PKG / "fetch" / f"{name}.py")
        assert not [m for m in mods if m.startswith("doctor.fetch.pipeline")], name


def test_record_file_name_is_spelled_only_in_record_py():
    spelled = [p.relative_to(PKG).as_posix() for p in (PKG / "fetch").glob("*.py")
               if '"torch-doctor.json"' in p.read_text()]
    assert spelled == ["fetch/record.py"]


def test_every_error_fetch_raises_says_what_to_do():
    """An error is one `error:` line and a `hint:` line (a usage error, exit 2, gets a pointer to
    --help from the CLI): every DoctorError built in doctor/fetch is given a hint."""
    kinds = {"DoctorError", "BadArchive", "ChecksumMismatch"}
    bare = []
    for path in sorted((PKG / "fetch").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in kinds:
                if len(node.args) < 2 and not any(k.arg == "hint" for k in node.keywords):
                    bare.append(f"{path.relative_to(PKG).as_posix()}:{node.lineno}")
    assert bare == []
