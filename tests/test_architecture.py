"""The package keeps to docs/architecture.md: an AST walk over every module of doctor/.

- Layers: a module imports only modules of its own layer or below (LAYERS, lowest first).
- Pure parts (verdicts, catalog, fixes, explain, render) never import the Host and never touch
  the world themselves: no os.environ/os.getenv, no subprocess, no open(), no Path reads/writes.
- Probes import no recommendation, verdict, fix, render or command code.
- explain imports only the catalog, the model, the fix builders, quoting and itself.
- No import cycles (strongly connected components), counting imports inside functions too:
  a lazy import only hides a circle, it does not make the dependency one-way.

Each rule is also run on a planted violation, so a walk that sees nothing cannot pass.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "doctor"

# Lowest first. A module may import its own layer and the ones before it, never a later one.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("doctor", "doctor.record", "doctor.model", "doctor.errors", "doctor.quoting", "doctor.bounded",
              "doctor.formats", "doctor.findings")),
    ("catalog", ("doctor.catalog",)),
    ("host", ("doctor.host", "doctor.writes", "doctor.address_space")),
    ("probe", ("doctor.probe",)),
    ("verdicts", ("doctor.diagnose", "doctor.policy", "doctor.requirements", "doctor.fixes")),
    ("text", ("doctor.explain", "doctor.render")),
    ("orchestration", ("doctor.fetch", "doctor.emit", "doctor.workload", "doctor.nar", "doctor.check",
                       "doctor.cuda_stack_check", "doctor.buildcheck", "doctor.explain_machine")),
    ("commands", ("doctor.commands",)),
    ("cli", ("doctor.cli", "doctor.__main__")),
]

# Parts that decide or write text: facts in, findings/text out, nothing from the world.
PURE = ("doctor.record", "doctor.model", "doctor.quoting", "doctor.formats", "doctor.findings", "doctor.catalog", "doctor.diagnose",
        "doctor.policy", "doctor.requirements", "doctor.fixes", "doctor.explain", "doctor.render")
# What explain may import besides the standard library and third-party packages.
EXPLAIN_MAY_IMPORT = ("doctor.catalog", "doctor.record", "doctor.model", "doctor.fixes", "doctor.quoting", "doctor.formats",
                      "doctor.findings", "doctor.explain")
# What a probe must never import (detection never calls policy).
PROBE_MAY_NOT = ("doctor.diagnose", "doctor.recommend", "doctor.catalog.recommend", "doctor.policy", "doctor.requirements",
                 "doctor.fixes", "doctor.explain", "doctor.render", "doctor.commands", "doctor.cli")

# Known exceptions, each with the issue that removes it. Keep this empty when you can.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the matching prefix, layer index)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if within(module, prefix) and (prefix != "doctor" or module == "doctor"):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return best[1] if best else None


@dataclass(frozen=True)
class Import:
    target: str
    line: int
    top_level: bool  # run when the module is imported (not inside a function)


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def load(root: Path = PACKAGE) -> dict[str, Module]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        out[name] = Module(name, path, ast.parse(path.read_text(), str(path)))
    return out


def imports(module: Module, known: set[str]) -> list[Import]:
    """The doctor modules `module` imports: `from a import b` counts as a.b when that is a module."""
    is_package = module.path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                continue  # typing-only imports never run
            if isinstance(child, ast.Import):
                found.extend(Import(a.name, child.lineno, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = module.name.split(".")
                    parts = parts[: len(parts) - child.level + (1 if is_package else 0)]
                    base = ".".join([*parts, base] if base else parts)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.append(Import(sub if sub in known else base, child.lineno, top))
            visit(child, inner)

    visit(module.tree, True)
    return [i for i in found if within(i.target, "doctor")]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


WORLD_OS = {"environ", "getenv", "putenv", "unsetenv", "system", "popen", "listdir", "scandir", "walk", "stat", "remove",
            "unlink", "rename", "replace", "mkdir", "makedirs"}
WORLD_PATH = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "exists", "is_file", "is_dir", "iterdir",
              "glob", "rglob", "stat", "mkdir", "unlink", "touch"}


def world_touches(tree: ast.AST) -> list[str]:
    """Direct uses of the world: os.environ and friends, subprocess, open(), Path(...).read_text() & co."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr in WORLD_OS:
                found.append(f"os.{node.attr} (line {node.lineno})")
            elif node.value.id in ("subprocess", "shutil", "tempfile"):
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("open", "input"):
                found.append(f"{func.id}() (line {node.lineno})")
            elif (isinstance(func, ast.Attribute) and func.attr in WORLD_PATH and isinstance(func.value, ast.Call)
                  and isinstance(func.value.func, ast.Name) and func.value.func.id in ("Path", "PosixPath", "WindowsPath")):
                found.append(f"Path(...).{func.attr}() (line {node.lineno})")
            elif isinstance(func, ast.Attribute) and func.attr in ("read_text", "write_text", "read_bytes", "write_bytes",
                                                                   "open"):
                found.append(f".{func.attr}() (line {node.lineno})")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for bad in ("subprocess", "shutil", "tempfile"):
                if bad in names:
                    found.append(f"import {bad} (line {node.lineno})")
            if isinstance(node, ast.ImportFrom) and node.module == "os" and {a.name for a in node.names} & WORLD_OS:
                found.append(f"from os import … (line {node.lineno})")
    return found


# -- the rules, as functions of the parsed package (so that a planted package can be checked too) --


def upward_imports(modules: dict[str, Module]) -> list[str]:
    bad = []
    for m in modules.values():
        mine = layer_of(m.name)
        for i in imports(m, set(modules)):
            theirs = layer_of(i.target)
            if mine is not None and theirs is not None and theirs > mine and (m.name, i.target) not in EXCEPTIONS:
                bad.append(f"{m.name} ({LAYERS[mine][0]}) imports {i.target} ({LAYERS[theirs][0]}) at line {i.line}")
    return bad


def unlayered(modules: dict[str, Module]) -> list[str]:
    return [name for name in modules if layer_of(name) is None]


def impure(modules: dict[str, Module]) -> list[str]:
    bad = []
    for m in modules.values():
        if not any(within(m.name, p) for p in PURE):
            continue
        bad += [f"{m.name} imports {i.target} (line {i.line})" for i in imports(m, set(modules))
                if within(i.target, "doctor.host") and (m.name, i.target) not in EXCEPTIONS]
        bad += [f"{m.name}: {t}" for t in world_touches(m.tree) if (m.name, t.split(" (")[0]) not in EXCEPTIONS]
    return bad


def probe_reaches_policy(modules: dict[str, Module]) -> list[str]:
    return [f"{m.name} imports {i.target} (line {i.line})" for m in modules.values() if within(m.name, "doctor.probe")
            for i in imports(m, set(modules)) if any(within(i.target, p) for p in PROBE_MAY_NOT)]


def explain_reaches_out(modules: dict[str, Module]) -> list[str]:
    return [f"{m.name} imports {i.target} (line {i.line})" for m in modules.values() if within(m.name, "doctor.explain")
            for i in imports(m, set(modules)) if not any(within(i.target, p) for p in EXPLAIN_MAY_IMPORT)]


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), over every import.

    Importing `a.b` also runs `a/__init__.py`, so a module-level edge to a.b is an edge to a too."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for m in modules.values():
        for i in imports(m, set(modules)):
            target = i.target
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != m.name:
                graph[m.name].add(target)
                parent = target.rpartition(".")[0]
                while i.top_level and parent and parent in modules and not within(m.name, parent):
                    graph[m.name].add(parent)
                    parent = parent.rpartition(".")[0]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:  # recursive Tarjan: the package is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


# -- the real package --


@pytest.fixture(scope="module")
def package() -> dict[str, Module]:
    return load()


def test_the_walk_reads_the_whole_package(package):
    # the layers name every module, so none slips between them
    assert len(package) > 100
    assert unlayered(package) == []


def test_no_layer_imports_upward(package):
    assert upward_imports(package) == []


def test_pure_parts_import_no_host_and_touch_no_world(package):
    assert impure(package) == []


def test_probes_import_no_policy_verdict_or_output_code(package):
    assert probe_reaches_policy(package) == []


def test_explain_imports_only_catalog_model_fixes_and_itself(package):
    assert explain_reaches_out(package) == []


def test_no_import_cycles(package):
    assert cycles(package) == []


def test_every_known_exception_is_still_needed(package):
    # an exception that the code no longer needs must go from the list
    for (module, what), why in EXCEPTIONS.items():
        assert module in package, f"{module} is gone: drop its exception ({why})"
        touches = [t.split(" (")[0] for t in world_touches(package[module].tree)]
        imported = [i.target for i in imports(package[module], set(package))]
        assert what in touches or what in imported, f"{module} no longer needs {what}: drop its exception ({why})"


# -- planted violations: each rule catches its own kind --


def plant(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    root = tmp_path / "doctor"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return load(root)


def test_a_planted_upward_import_is_caught(tmp_path):
    planted = plant(tmp_path, {
        "model.py": "",
        "catalog/__init__.py": "",
        "catalog/releases.py": "def f():\n    from doctor.probe import gpu\n",  # lazy, still upward
        "probe/__init__.py": "",
        "probe/gpu.py": "from ..diagnose import gpu\n",  # relative, upward, and a verdict
        "diagnose/__init__.py": "",
        "diagnose/gpu.py": "from doctor.model import Finding\n",
    })
    found = upward_imports(planted)
    assert any("doctor.catalog.releases (catalog) imports doctor.probe.gpu (probe)" in f for f in found)
    assert any("doctor.probe.gpu (probe) imports doctor.diagnose.gpu (verdicts)" in f for f in found)
    assert len(found) == 2
    assert probe_reaches_policy(planted) == ["doctor.probe.gpu imports doctor.diagnose.gpu (line 1)"]


def test_planted_world_touches_in_a_pure_part_are_caught(tmp_path):
    planted = plant(tmp_path, {
        "diagnose/__init__.py": "",
        "diagnose/gpu.py": ("import os, subprocess\nfrom pathlib import Path\nfrom doctor.host import Host\n"
                            "x = os.environ['A']\ny = os.getenv('B')\nopen('f')\nsubprocess.run(['x'])\n"
                            "Path('/etc/os-release').read_text()\nwith some_path.open('a') as f:\n    pass\n"),
        "probe/__init__.py": "",
        "probe/ok.py": "import os\nx = os.environ.get('A')\n",  # probes are not pure: not reported
    })
    found = impure(planted)
    assert "doctor.diagnose.gpu imports doctor.host (line 3)" in found
    kinds = {f.split(": ", 1)[1].split(" (")[0] for f in found if ": " in f}
    assert {"import subprocess", "os.environ", "os.getenv", "open()", "subprocess.run", "Path(...).read_text()", ".open()"} <= kinds
    assert not any("probe.ok" in f for f in found)


def test_planted_explain_import_of_a_probe_is_caught(tmp_path):
    planted = plant(tmp_path, {
        "explain/__init__.py": "from doctor.explain.engine import x\n",
        "explain/engine.py": "from doctor.catalog import cuda\nfrom doctor.probe.nvidia import parse\nx = 1\n",
        "catalog/__init__.py": "", "catalog/cuda.py": "", "probe/__init__.py": "", "probe/nvidia.py": "",
    })
    assert explain_reaches_out(planted) == ["doctor.explain.engine imports doctor.probe.nvidia (line 2)"]


def test_planted_cycles_are_caught_lazy_ones_too(tmp_path):
    planted = plant(tmp_path, {
        "explain/__init__.py": "",
        "explain/engine.py": "def explain():\n    from doctor.explain.advice import advise\n",  # lazy: still a circle
        "explain/advice.py": "from doctor.explain.engine import Match\n",
        "explain/facts.py": "",
        "explain/cuda.py": "from typing import TYPE_CHECKING\nfrom doctor.explain.facts import A\n"
                           "if TYPE_CHECKING:\n    from doctor.explain.advice import advise\n",  # typing only: none
        "fetch/__init__.py": "",
        "fetch/extract.py": "from doctor import nar\n",
        "nar.py": "from doctor.fetch.extract import f\n",
    })
    assert sorted(cycles(planted)) == [["doctor.explain.advice", "doctor.explain.engine"],
                                       ["doctor.fetch.extract", "doctor.nar"]]


def test_typing_only_imports_are_not_edges(tmp_path):
    planted = plant(tmp_path, {
        "catalog/__init__.py": "",
        "catalog/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from doctor.host import Host\n",
    })
    assert upward_imports(planted) == [] and impure(planted) == []
