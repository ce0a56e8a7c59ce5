"""The environment a libtorch install needs, as data: one list of `Var`s that every format renders.

Every emitter (setenv for each shell, GitHub, Nix, cabal, cargo, CMake) starts from
`variables(install)`, so the formats cannot drift apart; `apply` is the reference meaning
of the list (what the environment is after sourcing), which the shell tests compare against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath, PureWindowsPath

from doctor.catalog.platforms import loader_variable, separator
from doctor.catalog.releases import ABI_DEFINE
from doctor.errors import DoctorError
from doctor.quoting import list_element, loader_token
from doctor.record import record


@record(frozen=True)
class Var:
    """One environment variable.

    mode "set": the variable becomes `value`.
    mode "prepend": `value` holds one or more path elements joined by the platform's list
    separator (`separator(system)`: ":" on Linux and macOS, ";" on Windows), in the order they
    must come first; sourcing moves them to the front once and never leaves an empty element.
    """

    name: str
    value: str
    mode: str  # "set" | "prepend"

    def elements(self, system: str = "Linux") -> list[str]:
        return [e for e in self.value.split(separator(system)) if e] if self.mode == "prepend" else [self.value]


def _path(system: str):
    return PureWindowsPath if system == "Windows" else PurePosixPath


def variables(install, system: str = "Linux") -> list[Var]:
    """The variables that make builds and runs find `install` (a doctor.probe.libtorch.LibtorchInstall).

    tch-rs reads LIBTORCH_INCLUDE and LIBTORCH_LIB as prefixes: it appends `include` and
    `lib` itself, so they name the folders above the include and lib dirs.
    """
    P = _path(system)
    sep = separator(system)
    root = str(install.root)
    include_dirs = [str(d) for d in install.include_dirs] or [str(P(root) / "include"), str(P(root) / "include/torch/csrc/api/include")]
    lib_dir = str(install.lib_dir or P(root) / "lib")
    out = [
        Var("LIBTORCH", root, "set"),
        Var("LIBTORCH_INCLUDE", str(P(include_dirs[0]).parent), "set"),
        Var("LIBTORCH_LIB", str(P(lib_dir).parent), "set"),
    ]
    if system == "Linux" and install.abi in ABI_DEFINE:
        out.append(Var("LIBTORCH_CXX11_ABI", ABI_DEFINE[install.abi], "set"))
    h = getattr(install, "hasktorch", None)
    if h:
        out += [
            Var("LIBTORCH_HOME", str(h["home"]), "set"),
            Var("LIBTORCH_VERSION", str(h["version"]), "set"),
            Var("LIBTORCH_CUDA_VERSION", str(h["flavour"]), "set"),
            Var("LIBTORCH_SKIP_DOWNLOAD", "1", "set"),
        ]
    # Paths that go into a separated list cannot hold the separator (no quoting exists there).
    for name, paths in (("CMAKE_PREFIX_PATH", [root]), ("the include path", include_dirs), ("the library path", [lib_dir])):
        for path in paths:
            list_element(path, name, sep)
    if system == "Linux" and (token := loader_token(lib_dir)):
        raise DoctorError(f"the path {lib_dir} contains {token!r}, which ld.so replaces in LD_LIBRARY_PATH: programs "
                          "would look in another folder", "move or link the libtorch tree to a path without it and pass "
                          "--libtorch", error_id="emit.unrepresentable")
    out += [
        Var("Torch_DIR", str(P(root) / "share" / "cmake" / "Torch"), "set"),
        Var("CMAKE_PREFIX_PATH", root, "prepend"),
    ]
    if system == "Windows":
        # MSVC reads INCLUDE and LIB; the loader reads PATH.
        out += [
            Var("INCLUDE", sep.join(include_dirs), "prepend"),
            Var("LIB", lib_dir, "prepend"),
            Var("PATH", lib_dir, "prepend"),
        ]
    else:
        # CPLUS_INCLUDE_PATH (not CPATH): the headers are C++ only, and gcc/clang treat these
        # dirs like -isystem, so torch's own warnings stay out of the user's build log.
        out += [
            Var("CPLUS_INCLUDE_PATH", sep.join(include_dirs), "prepend"),
            Var("LIBRARY_PATH", lib_dir, "prepend"),
            Var(loader_variable(system), lib_dir, "prepend"),
        ]
    return out


def apply(vars: Iterable[Var], env: Mapping[str, str], system: str = "Linux") -> dict[str, str]:
    """The environment after sourcing the emitted file once over `env`.

    Prepending is idempotent: our elements move to the front (once), existing copies of
    them and empty elements (which the loader reads as "the current directory") are dropped.
    """
    sep = separator(system)
    result = dict(env)
    for var in vars:
        if var.mode == "set":
            result[var.name] = var.value
            continue
        ours = list(dict.fromkeys(var.elements(system)))
        rest = [e for e in result.get(var.name, "").split(sep) if e and e not in ours]
        result[var.name] = sep.join(ours + rest)
    return result
