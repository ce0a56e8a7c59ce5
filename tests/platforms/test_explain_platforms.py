"""explain on macOS and Windows logs read on Linux: the fix speaks the log's platform."""

from __future__ import annotations

from pathlib import Path

from doctor.explain import MachineFacts, explain_text

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
LINUX = MachineFacts(system="Linux")


def _only(text: str):
    [finding] = explain_text(text, LINUX)
    return finding


def test_winerror_126_fix_uses_the_logs_folder_in_both_windows_shells():
    f = _only((LOGS / "loader.library-not-found--diffusers-5247.log").read_text())
    folder = r"C:\ai\stable-diffusion-webui\venv\lib\site-packages\torch\lib"
    assert f"$env:PATH = '{folder};' + $env:PATH" in f.fix
    assert f'set "PATH={folder};%PATH%"' in f.fix
    assert "vc_redist.x64.exe" in f.fix and "/" + "lib" not in f.fix.replace("https://aka.ms/vs/17/release/", "")


def test_a_quote_in_a_windows_path_is_doubled_for_powershell():
    from doctor.explain.platform_advice import windows_path_fix

    text = windows_path_fix("C:\\Users\\O'Brien\\R&D ^x\\torch\\lib")
    assert text.splitlines() == ["PowerShell: $env:PATH = 'C:\\Users\\O''Brien\\R&D ^x\\torch\\lib;' + $env:PATH",
                                 'cmd: set "PATH=C:\\Users\\O\'Brien\\R&D ^x\\torch\\lib;%PATH%"']


def test_a_percent_in_the_path_drops_the_cmd_line_keeps_powershell():
    f = _only('OSError: [WinError 126] x. Error loading "D:\\100%\\torch\\lib\\c10.dll" or one of its dependencies.')
    assert "cmd:" not in f.fix and r"'D:\100%\torch\lib;'" in f.fix


def test_dyld_log_gets_rpath_advice_with_the_referencing_folder():
    f = _only("dyld: Library not loaded: @rpath/libc10.dylib\n  Referenced from: /Users/me/app/build/app\n")
    assert "install_name_tool -add_rpath" in f.fix and "SIP" in f.fix


def test_lnk2038_debug_release_and_static_dynamic_get_different_fixes():
    debug = _only((LOGS / "windows.crt-mismatch--tdlib-443.log").read_text())
    static = _only((LOGS / "windows.crt-mismatch--tch-rs-641.log").read_text())
    assert debug.title.startswith("Debug and Release") and "--debug" in debug.fix
    assert static.title.startswith("static (/MT)") and "MultiThreadedDLL" in static.fix


def test_missing_vc_runtime_names_the_dlls():
    f = _only((LOGS / "windows.vc-runtime-missing--spotube-12.log").read_text())
    assert f.id == "windows.vc-runtime-missing" and "msvcp140.dll" in f.title and "vcruntime140.dll" in f.title
