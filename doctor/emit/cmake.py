"""A CMakeUserPresets.json: a configure preset that finds this libtorch with no other flags.

`cmake --preset libtorch` sets Torch_DIR (and the ABI define on Linux).
"""

from __future__ import annotations

import json
import re

from doctor import __version__
from doctor.emit._common import describe, refuse_control
from doctor.emit.variables import variables
from doctor.errors import DoctorError
from doctor.host import Host

PRESET = "libtorch"
# Preset strings expand ${...}, $env{...}, $penv{...} and $vendor{...}.
_MACRO = re.compile(r"\$(env|penv|vendor)?\{")


def render(install, host: Host) -> str:
    vars = {v.name: v for v in variables(install, host.system)}
    torch_dir = vars["Torch_DIR"].value
    lib_dir = str(install.lib_dir)
    refuse_control([torch_dir, lib_dir], "CMakeUserPresets.json")
    for value in (torch_dir, lib_dir):
        if _MACRO.search(value):
            raise DoctorError(
                f"{value} looks like a CMake preset macro (${{...}}), which a preset would expand",
                "use `doctor emit setenv` (Torch_DIR) instead of a preset for this path",
                error_id="emit.unrepresentable",
            )
    cache = {"Torch_DIR": torch_dir}
    if "LIBTORCH_CXX11_ABI" in vars:
        # Before 2.8 TorchConfig.cmake adds this define itself; from 2.8 on it does not.
        cache["CMAKE_CXX_FLAGS"] = f"-D_GLIBCXX_USE_CXX11_ABI={vars['LIBTORCH_CXX11_ABI'].value}"
    doc = {
        "version": 3,
        "cmakeMinimumRequired": {"major": 3, "minor": 21, "patch": 0},
        "vendor": {"torch-doctor": {"generatedBy": f"torch-doctor {__version__}: doctor emit cmake", "install": describe(install)}},
        "configurePresets": [
            {
                "name": PRESET,
                "displayName": f"libtorch {install.label} (torch-doctor)",
                "binaryDir": "${sourceDir}/build",
                "cacheVariables": cache,
            }
        ],
        # No test preset: find_package(Torch) links by full path, so CMake's build-tree RPATH
        # already names the lib dir and tests run without a loader variable.
        "buildPresets": [{"name": PRESET, "configurePreset": PRESET}],
    }
    # CMake reads presets as UTF-8: written as such, an undecodable path reaches emit's refusal
    # instead of becoming a "\\udcff" escape that names no folder.
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
