"""The GPU layers keep to DESIGN.md: the verdicts (doctor/diagnose/gpu*.py) and the catalog
(doctor/catalog/*, where the recommendation lives) are pure — they import neither the Host nor
any probe, and touch no environment, process or file themselves; the probes import no
recommendation or verdict code. A small AST walk over the real sources (issue 12 §1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "doctor"
PURE = sorted([*PACKAGE.glob("diagnose/gpu*.py"), *PACKAGE.glob("catalog/*.py")])
GPU_PROBES = [PACKAGE / "probe" / f"{n}.py" for n in ("gpu", "nvidia", "rocm", "apple", "devices")]


def imported_modules(tree: ast.AST, module: str) -> set[str]:
    """Every module a file imports, absolute (relative imports resolved against `module`)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: -node.level]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def world_touches(tree: ast.AST) -> list[str]:
    """Direct uses of os.environ / os.getenv, subprocess, and the builtin open()."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr in ("environ", "getenv", "system", "popen"):
                found.append(f"os.{node.attr} (line {node.lineno})")
            if node.value.id == "subprocess":
                found.append(f"subprocess.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            found.append(f"open() (line {node.lineno})")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if "subprocess" in names:
                found.append(f"import subprocess (line {node.lineno})")
    return found


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def test_the_walk_sees_what_it_must_refuse():
    # the checks themselves fail on the things they look for
    bad = ast.parse("import os, subprocess\nfrom doctor.host import Host\nfrom ..probe import gpu\n"
                    "x = os.environ['A']\nopen('f')\nsubprocess.run(['x'])\n")
    assert {"doctor.host", "doctor.probe", "doctor.probe.gpu"} <= imported_modules(bad, "doctor.diagnose.gpu")
    assert len(world_touches(bad)) == 4


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pure_layers_import_no_host_and_no_probe(path):
    bad = [m for m in imported_modules(parse(path), module_name(path))
           if m == "doctor.host" or m == "doctor.probe" or m.startswith(("doctor.host.", "doctor.probe."))]
    assert bad == [], f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pure_layers_touch_no_environment_process_or_file(path):
    assert world_touches(parse(path)) == []


@pytest.mark.parametrize("path", GPU_PROBES, ids=lambda p: p.name)
def test_gpu_probes_import_no_recommendation_and_no_verdicts(path):
    bad = [m for m in imported_modules(parse(path), module_name(path))
           if m.startswith(("doctor.diagnose", "doctor.recommend", "doctor.catalog.recommend", "doctor.policy", "doctor.fixes"))]
    assert bad == [], f"{path.name} imports {bad}"


def test_the_recommend_import_circle_is_gone():
    # doctor/recommend.py only re-exports the catalog's function; nothing under doctor/probe reaches it
    shim = imported_modules(parse(PACKAGE / "recommend.py"), "doctor.recommend")
    assert not any(m.startswith("doctor.probe") for m in shim)
