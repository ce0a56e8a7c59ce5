"""tests/ mirrors doctor/ and shares code only through tests/testsupport (see tests/README.md):
a new folder must be a doctor subpackage or one of the named cross-cutting ones, and no test
reaches another test module, a conftest, or sys.path to find its helpers."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "doctor"
# Folders that do not mirror a doctor subpackage, and why they exist.
OTHER = {
    "testsupport": "the helpers package",
    "fixtures": "real captured inputs",
    "torchfn": "the torchfn package",
    "scripts": "scripts/* run for real",
    "ci": "action.yml and the docs/ci.md recipes",
    "hardening": "cross-cutting threat tests",
    "platforms": "macOS and Windows trees end to end, from the real wheels (issue 14)",
    "clients": "real cargo, cabal and CMake client builds; the tch-rs and Hasktorch rules (issue 18)",
    "__pycache__": "",
}


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_folder_mirrors_a_doctor_subpackage_or_is_named():
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    stray = [p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in subpackages | OTHER.keys()]
    assert stray == []


def test_helpers_come_from_testsupport_only():
    test_modules = {p.stem for p in python_files() if p.name.startswith("test_")}
    bad = []
    for path in python_files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top, last = name.split(".")[0], name.split(".")[-1]
                if top == "tests" or last == "conftest" or last in test_modules:
                    bad.append(f"{path.relative_to(TESTS)} imports {name}")
            if (isinstance(node, ast.Attribute) and node.attr in ("insert", "append")
                    and isinstance(node.value, ast.Attribute) and node.value.attr == "path"
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "sys"):
                bad.append(f"{path.relative_to(TESTS)} changes sys.path")
    assert bad == []


def test_test_module_names_are_unique():
    """pytest's default (prepend) import mode imports each test file by its bare name."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in python_files():
        if path.name.startswith("test_"):
            if path.name in seen:
                clashes.append(f"{seen[path.name].relative_to(TESTS)} and {path.relative_to(TESTS)}")
            seen[path.name] = path
    assert clashes == []
