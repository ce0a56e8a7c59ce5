"""Threat: a `fix:` line from `check` or `explain` is pasted into a shell, and a path in it holding
`$(…)`, backticks or quotes runs code or sets the wrong value.

The fix texts come from the real diagnose and explain code for a libtorch under a hostile folder;
real shells (bash, zsh, dash) run the pasted `export` lines and show the words of the pasted
commands; nothing may run and every value must be the path exactly.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from doctor.diagnose.loader import loader_area
import dataclasses

from doctor.explain import MachineFacts, find, findings, lookups
from doctor.explain_machine import libtorch_facts
from doctor.probe.libtorch import LibtorchInstall
from doctor.probe.loader import LibraryView, LoaderFacts, Resolution
from doctor.quoting import sh_paste as paste_word

SHELLS = {"bash": ["bash", "--norc", "--noprofile", "-c"], "zsh": ["zsh", "-f", "-c"], "dash": ["dash", "-c"]}


def root_in(tmp_path) -> str:
    return f"{tmp_path}/x $(touch PWNED) `touch PWNED` \"dq\" 'sq' \\b =y/libtorch"


def install_at(root: str) -> LibtorchInstall:
    return LibtorchInstall(root=root, origins=["LIBTORCH"], include_dirs=[f"{root}/include", f"{root}/include/torch/csrc/api/include"],
                           lib_dir=f"{root}/lib", exists=True, complete=True, version="2.13.0", variant="cpu", abi="cxx11")


def paste(shell: str, line: str, tmp_path, env: dict[str, str]) -> str:
    if shutil.which(shell) is None:
        pytest.fail(f"{shell} is needed for this test: run scripts/test")
    out = subprocess.run(SHELLS[shell] + [line], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **env},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "PWNED").exists(), f"{shell} ran code from a path in: {line}"
    return out.stdout


def exports(fix: str) -> list[str]:
    return [part.strip() for line in fix.splitlines() for part in line.split("; ")
            if part.strip().startswith("export ")]


def explain_all_present(log: str, install: LibtorchInstall):
    """The one finding of `log`, every file the advice looks for present (as the command layer would say)."""
    facts = MachineFacts(install=libtorch_facts(install))
    matches = find(log)
    paths = frozenset(p for m in matches for p in lookups(m, facts))
    (finding,) = findings(matches, dataclasses.replace(facts, looked=paths, present=paths))
    return finding


def explain_fixes(tmp_path, log: str) -> str:
    return explain_all_present(log, install_at(root_in(tmp_path))).fix


LOGS = {
    "loader": "./app: error while loading shared libraries: libc10.so: cannot open shared object file: No such file or directory",
    "link": "/usr/bin/ld: cannot find -ltorch: No such file or directory",
    "headers": "main.cpp:1:10: fatal error: torch/torch.h: No such file or directory",
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "dash"])
@pytest.mark.parametrize("kind", list(LOGS))
def test_explain_export_fixes_set_the_exact_path_and_run_nothing(tmp_path, shell, kind):
    root = root_in(tmp_path)
    fix = explain_fixes(tmp_path, LOGS[kind])
    lines = exports(fix)
    assert lines, fix
    for line in lines:
        variable = line.split()[1].split("=", 1)[0]
        got = paste(shell, f'{line}; printf %s "${variable}"', tmp_path, {variable: "/old"})
        expected = {"CPLUS_INCLUDE_PATH": f"{root}/include:{root}/include/torch/csrc/api/include"}.get(variable, f"{root}/lib")
        assert got == f"{expected}:/old", (shell, line)


@pytest.mark.parametrize("shell", ["bash", "zsh", "dash"])
def test_explain_command_words_are_the_exact_paths(tmp_path, shell):
    root = root_in(tmp_path)
    fix = explain_fixes(tmp_path, "CMake Error at CMakeLists.txt:3 (find_package):\n  Could not find a package configuration "
                        'file provided by "Torch" with any of the following names:\n    TorchConfig.cmake')
    command = fix.split("   (", 1)[0]
    assert command.startswith("cmake ")
    words = paste(shell, "printf '%s\\n' " + command.removeprefix("cmake "), tmp_path, {}).splitlines()
    assert words == [f"-DCMAKE_PREFIX_PATH={root}", ".."]
    link = explain_fixes(tmp_path, LOGS["link"])
    flag = link.split("(or ", 1)[1].split(";", 1)[0]
    assert paste(shell, f"printf '%s' {flag}", tmp_path, {}) == f"-L{root}/lib"


@pytest.mark.parametrize("shell", ["bash", "zsh", "dash"])
def test_check_loader_fix_sets_the_exact_path_and_runs_nothing(tmp_path, shell):
    root = root_in(tmp_path)
    facts = LoaderFacts("LD_LIBRARY_PATH", [], f"{root}/lib",
                        libraries=[LibraryView("libc10.so", Resolution("libc10.so", None, ""))])
    (finding,) = [f for f in loader_area(facts).findings if f.id == "loader.library-not-found"]
    line = finding.fix.split("   (or:", 1)[0]
    assert paste(shell, f'{line}; printf %s "$LD_LIBRARY_PATH"', tmp_path, {}) == f"{root}/lib"
    rpath = finding.fix.rsplit("link with ", 1)[1].rstrip(")")
    assert paste(shell, f"printf '%s' {rpath}", tmp_path, {}) == f"-Wl,-rpath,{root}/lib"


def test_plain_paths_stay_readable_and_colon_paths_get_advice_not_a_broken_export():
    finding = explain_all_present(LOGS["loader"], install_at("/opt/libtorch"))
    assert 'export LD_LIBRARY_PATH="/opt/libtorch/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"' in finding.fix
    finding = explain_all_present(LOGS["loader"], install_at("/opt/a:b/libtorch"))
    assert "export LD_LIBRARY_PATH" not in finding.fix and "to a path without ':'" in finding.fix
    assert "-rpath" not in finding.fix  # RUNPATH is a ':'-list too: no flag that cannot work


def _loader_fix(source: str, root: str) -> str:
    if source == "explain":
        return explain_all_present(LOGS["loader"], install_at(root)).fix
    facts = LoaderFacts("LD_LIBRARY_PATH", [], f"{root}/lib",
                        libraries=[LibraryView("libc10.so", Resolution("libc10.so", None, ""))])
    (finding,) = [f for f in loader_area(facts).findings if f.id == "loader.library-not-found"]
    return finding.fix


@pytest.mark.slow
@pytest.mark.parametrize("source", ["check", "explain"])
@pytest.mark.parametrize("folder", ["comma,dir", "plain"])
def test_the_rpath_fix_links_a_program_that_starts_alone(tmp_path, wheel_root, source, folder):
    """The flag as the fix prints it, pasted into a real gcc link against the wheel's libc10.so
    in a folder named with a comma: gcc splits `-Wl,` at commas (ld: cannot find dir/lt/lib)."""
    gcc = shutil.which("gcc") or pytest.fail("gcc is needed for this test")
    root = tmp_path / folder / "lt"
    (root / "lib").mkdir(parents=True)
    shutil.copy(wheel_root / "lib/libc10.so", root / "lib/libc10.so")
    (tmp_path / "t.c").write_text('#include <stdio.h>\nint main(void) { puts("started"); return 0; }\n')
    fix = _loader_fix(source, str(root))
    flag = fix.split("link with ", 1)[1].split(")", 1)[0].split(";", 1)[0]
    link = f"{gcc} t.c -o t -L{paste_word(str(root / 'lib'))} -Wl,--no-as-needed -lc10 {flag}"
    built = subprocess.run(["bash", "--norc", "--noprofile", "-c", link], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert built.returncode == 0, (flag, built.stderr)
    dynamic = subprocess.run(["readelf", "-d", str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout
    assert f"Library runpath: [{root}/lib]" in dynamic, (flag, dynamic)
    run = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and run.stdout == "started\n", run.stderr
    ldd = subprocess.run(["ldd", str(tmp_path / "t")], capture_output=True, text=True, timeout=30).stdout
    assert f"libc10.so => {root}/lib/libc10.so" in ldd
