"""fetch-libtorch for macOS and Windows: the official zip names, and --from-wheel building the
tree from that platform's real wheel (pip reads the cached wheel through its own configuration)."""

from __future__ import annotations

import json

import pytest
from testsupport.platform_wheels import wheel_path
from testsupport.support import doctor_subprocess


@pytest.mark.parametrize("args,url", [
    (["--platform", "macos-arm64"], "https://download.pytorch.org/libtorch/cpu/libtorch-macos-arm64-2.13.0.zip"),
    (["--platform", "windows-x86_64", "--variant", "cu130"],
     "https://download.pytorch.org/libtorch/cu130/libtorch-win-shared-with-deps-2.13.0%2Bcu130.zip"),
    (["--platform", "windows-x86_64", "--variant", "cpu", "--debug"],
     "https://download.pytorch.org/libtorch/cpu/libtorch-win-shared-with-deps-debug-2.13.0%2Bcpu.zip"),
])
def test_official_zip_for_another_platform(args, url):
    out = doctor_subprocess("fetch-libtorch", "--version", "2.13.0", *args, "--dry-run", "--json", "--no-lock")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert json.dumps(plan).count(url) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("platform,title", [("macos-arm64", "Platform (macOS)"), ("windows-x86_64", "Platform (Windows)")])
def test_from_wheel_for_another_platform_then_check(tmp_path, platform, title):
    wheel = wheel_path(platform)
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheel.parent)}
    dest = tmp_path / "tree"
    out = doctor_subprocess("fetch-libtorch", "--from-wheel", "--platform", platform, "--version", "2.13.0",
                            "--dest", str(dest), "--no-lock", "-q", env=env)
    assert out.returncode == 0, out.stderr
    # macOS zips write no variant suffix (libtorch-releases.md); the tree's version.py decides the rest
    assert (dest / "build-version").read_text().strip() in ("2.13.0", "2.13.0+cpu")
    assert (dest / "lib" / ("libc10.dylib" if platform.startswith("macos") else "c10.dll")).is_file()
    report = json.loads(doctor_subprocess("check", "--json", "--libtorch", str(dest)).stdout)
    areas = {a["title"]: a for a in report["areas"]}
    assert areas[title]["level"] == "ok", areas[title]
    [install] = [c for c in report["facts"]["libtorch"]["candidates"] if c["root"] == str(dest)]
    assert (install["version"], install["variant"], install["complete"]) == ("2.13.0", "cpu", True)
