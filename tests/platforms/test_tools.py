"""macOS and Windows tool probes through Host, driven by recorded real outputs."""

from __future__ import annotations

from pathlib import Path

from testsupport.platform_wheels import tree_copy

from doctor.diagnose.platform_tree import platform_area
from doctor.host import Host
from doctor.probe.platform_mac import detect_mac_tools, parse_apple_clang
from doctor.probe.platform_tree import detect_platform_tree
from doctor.probe.platform_win import detect_win_tools, parse_cl_banner, parse_vswhere_json

FIXTURES = Path(__file__).parent.parent / "fixtures" / "platforms"


def _script(root: Path, name: str, stdout: str = "", stderr: str = "", code: int = 0) -> None:
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    (root / f"{name}.out").write_text(stdout)
    (root / f"{name}.err").write_text(stderr)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n/bin/cat '{root}/{name}.out'\n/bin/cat '{root}/{name}.err' >&2\nexit {code}\n")
    path.chmod(0o755)


def test_parse_apple_clang():
    assert parse_apple_clang((FIXTURES / "apple-clang-15.txt").read_text()) == ("15.0.0", "clang-1500.0.40.1", "arm64-apple-darwin23.1.0")
    assert parse_apple_clang((FIXTURES / "apple-clang-14.txt").read_text())[0] == "14.0.3"
    assert parse_apple_clang("clang version 14.0.6\nTarget: x86_64-pc-linux-gnu\n") == (None, None, "x86_64-pc-linux-gnu")


def test_parse_cl_and_vswhere():
    assert parse_cl_banner((FIXTURES / "cl-19.13-x64.txt").read_text()) == ("19.13.26131.1", "x64")
    assert parse_cl_banner("cl is not recognized as an internal or external command") == (None, None)
    [vs] = parse_vswhere_json((FIXTURES / "vswhere-buildtools-2022.json").read_text())
    assert vs == {"name": "Visual Studio Build Tools 2022", "version": "17.13.35931.197",
                  "path": r"C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools"}
    assert parse_vswhere_json("[" * 10000) == [] and parse_vswhere_json("not json") == []


def test_mac_tools_on_a_fake_mac(tmp_path):
    _script(tmp_path, "sysctl", "Apple M1\n")
    _script(tmp_path, "xcrun", "14.2\n")
    _script(tmp_path, "clang", (FIXTURES / "apple-clang-15.txt").read_text())
    host = Host.for_test(tmp_path, system="Darwin", machine="arm64")
    tools = detect_mac_tools(host)
    assert (tools.cpu, tools.sdk_version, tools.clang, tools.missing) == ("Apple M1", "14.2", "15.0.0", [])


def test_mac_without_command_line_tools(tmp_path):
    _script(tmp_path, "sysctl", "Apple M2 Pro\n")
    tools = detect_mac_tools(Host.for_test(tmp_path, system="Darwin", machine="arm64"))
    assert tools.clang is None and tools.missing and "xcode-select --install" in tools.missing[0]


def test_windows_tools_in_the_platform_area(tmp_path):
    _script(tmp_path, "vswhere", (FIXTURES / "vswhere-buildtools-2022.json").read_text())
    _script(tmp_path, "cl.exe", "", (FIXTURES / "cl-19.13-x64.txt").read_text(), code=2)
    host = Host.for_test(tmp_path, system="Windows")
    tools = detect_win_tools(host)
    assert (tools.cl_version, tools.cl_target, tools.missing) == ("19.13.26131.1", "x64", [])
    tree_copy("windows-x86_64", tmp_path)
    area = platform_area(detect_platform_tree(host, "/libtorch/lib"))
    assert any("Visual Studio Build Tools 2022 17.13.35931.197; cl.exe 19.13.26131.1 for x64" in d for d in area.details)


def test_windows_without_tools(tmp_path):
    tools = detect_win_tools(Host.for_test(tmp_path, system="Windows"))
    assert tools.visual_studio == [] and tools.cl_version is None and len(tools.missing) == 2
