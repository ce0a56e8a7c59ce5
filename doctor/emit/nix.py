"""A flake.nix for a libtorch: `fetchzip` of the archive it came from, a package, a devShell.

The hash is the SRI NAR hash of the unpacked, root-stripped tree (what fetchzip checks),
taken from the install record `doctor fetch-libtorch` wrote — never a placeholder. A tree
with no known source archive (a Python wheel's libtorch) cannot be fetched by Nix: we say
so and name the command that gives one, or `--nixpkgs-libtorch` for nixpkgs' libtorch-bin.
"""

from __future__ import annotations

import re
from dataclasses import replace

from doctor.emit._common import header_lines
from doctor.emit.variables import variables
from doctor.errors import DoctorError
from doctor.fetch.install import NOT_HASHED, read_install_record
from doctor.host import Host

# A named release branch: reproducible enough to share, and it carries security fixes.
NIXPKGS_URL = "github:NixOS/nixpkgs/nixos-25.11"
# Systems nixpkgs' libtorch-bin is built for.
NIXPKGS_LIBTORCH_SYSTEMS = ("x86_64-linux", "aarch64-darwin")
NIXOS_DRIVER_LIB = "/run/opengl-driver/lib"
_SRI = re.compile(r"^sha256-[A-Za-z0-9+/]{43}=$")
_ROOT = "@LIBTORCH@"  # stands for the store path while the variables are built
_DEV = "@LIBTORCH_DEV@"
_SKIP = {"LIBTORCH_HOME", "LIBTORCH_VERSION", "LIBTORCH_CUDA_VERSION", "LIBTORCH_SKIP_DOWNLOAD"}


def nix_str(value: str) -> str:
    """A Nix double-quoted string whose value is exactly `value` (no interpolation)."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${")
    out = out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return '"' + out + '"'


def _with_refs(value: str) -> str:
    """A Nix string for `value` in which the placeholders become ${libtorch} / ${dev}."""
    parts = re.split(f"({re.escape(_ROOT)}|{re.escape(_DEV)})", value)
    out = []
    for part in parts:
        if part == _ROOT:
            out.append("${libtorch}")
        elif part == _DEV:
            out.append("${dev}")
        else:
            text = nix_str(part)[1:-1]
            # "$${" is Nix's escape for a literal "${": a $ just before ${libtorch} needs "\$".
            # (nix_str never ends a string with an escape of its own, so a final $ is always literal.)
            out.append(text[:-1] + "\\$" if text.endswith("$") else text)
    return '"' + "".join(out) + '"'


def nix_system(install, host: Host) -> str:
    """x86_64-linux, aarch64-linux, aarch64-darwin, x86_64-darwin for the install's platform."""
    platform = str(((install.record or {}).get("platform")) or "").lower()
    if platform:
        os_ = "darwin" if ("mac" in platform or "darwin" in platform) else "windows" if "win" in platform else "linux"
        arch = "aarch64" if any(a in platform for a in ("arm64", "aarch64")) else "x86_64"
    else:
        os_ = {"Darwin": "darwin", "Windows": "windows"}.get(host.system, "linux")
        arch = "aarch64" if host.machine.lower() in ("arm64", "aarch64") else "x86_64"
    if os_ == "windows":
        raise DoctorError("Nix has no Windows systems", "use `doctor emit setenv --shell pwsh` on Windows",
                          error_id="emit.unsupported-platform")
    return f"{arch}-{os_}"


def _is_cuda(install) -> bool:
    variant = str(install.variant or (install.record or {}).get("variant") or "")
    return variant.startswith("cu")


def _source(install, host: Host) -> tuple[str, str, bool]:
    """(url, SRI hash, strip_root) of the archive the tree was unpacked from."""
    record = install.record or read_install_record(install.root) or {}
    src = record.get("source") if isinstance(record.get("source"), dict) else {}
    url = src.get("url")
    # Only a zip fetched by URL is something fetchzip can fetch again: a local --archive has no
    # URL, and a wheel's tree is a part of the wheel, not the whole unpacked file.
    fetchable = src.get("kind", "url") == "url" and str(url or "").startswith(("https://", "http://"))
    if not fetchable:
        version = install.version or "VERSION"
        variant = install.variant or "cpu"
        if "python" in install.origins and not record:
            kind = "a Python wheel's libtorch"
        elif src.get("kind") in ("wheel", "archive"):
            kind = f"fetched from a {'wheel' if src['kind'] == 'wheel' else 'local archive'}"
        else:
            kind = "no install record with a download URL"
        raise DoctorError(
            f"{install.root} has no known source archive ({kind}), so a flake cannot fetch it",
            f"run `doctor fetch-libtorch --version {version} --variant {variant} --emit nix` to fetch the official "
            "archive and get its flake, or `doctor emit nix --nixpkgs-libtorch` to use nixpkgs' libtorch-bin",
            error_id="emit.no-source-archive",
        )
    nar = record.get("nar_hash")
    if not nar:
        from doctor.nar import nar_hash

        # A record without the hash: hash the tree itself, minus the files fetch-libtorch added.
        excludes = record.get("nar_excludes") or NOT_HASHED
        nar = nar_hash(host.real(install.root), exclude_top=tuple(excludes) + ("libtorch.lock",))
    if not isinstance(nar, str) or not _SRI.match(nar):
        raise DoctorError(f"the install record's nar_hash {nar!r} is not an SRI sha256 hash", "re-run `doctor fetch-libtorch`",
                          error_id="emit.bad-record")
    return str(url), nar, record.get("strip_root", True) is not False


def _store_name(install) -> str:
    # '+' and '%' are not allowed in store names; fetchzip's default name comes from the URL.
    version = re.sub(r"[^A-Za-z0-9._-]", "-", install.version or "unknown")
    variant = re.sub(r"[^A-Za-z0-9._-]", "-", install.variant or "cpu")
    return f"libtorch-{version}-{variant}"


def _shell_vars(install, dev: bool, system: str) -> list[tuple[str, str]]:
    """(name, value) for the devShell: the setenv variables with the tree at its store path
    (placeholders `_ROOT` / `_DEV`, turned into ${libtorch} / ${dev} by `_with_refs`)."""
    placeholder = replace(
        install,
        root=_ROOT,
        include_dirs=[f"{_DEV if dev else _ROOT}/include", f"{_DEV if dev else _ROOT}/include/torch/csrc/api/include"],
        lib_dir=f"{_ROOT}/lib",
        hasktorch=None,
        # nixpkgs' libtorch-bin is a current, CXX11-ABI build whatever the local tree is.
        abi="cxx11" if dev else install.abi,
    )
    out = []
    for v in variables(placeholder, system):
        if v.name in _SKIP:
            continue
        value = v.value
        if dev and v.name in ("Torch_DIR", "CMAKE_PREFIX_PATH"):
            value = value.replace(_ROOT, _DEV)  # libtorch-bin moves share/cmake into `dev`
        out.append((v.name, value))
    return out


def render(install, host: Host, nixpkgs_libtorch: bool = False) -> str:
    cuda = _is_cuda(install)
    if nixpkgs_libtorch:
        # libtorch-bin's CUDA build exists for x86_64-linux only.
        systems = ["x86_64-linux"] if cuda else list(NIXPKGS_LIBTORCH_SYSTEMS)
        command = "doctor emit nix --nixpkgs-libtorch"
        description = "nixpkgs' libtorch-bin" + (" (CUDA)" if cuda else "") + ", environment by torch-doctor"
    else:
        systems = [nix_system(install, host)]
        url, nar, strip_root = _source(install, host)
        command = "doctor emit nix"
        description = f"libtorch {install.label}, environment by torch-doctor"
    darwin_only = all(s.endswith("-darwin") for s in systems)
    linux_only = all(s.endswith("-linux") for s in systems)
    lines = ["# " + line for line in header_lines(install, command)]
    if nixpkgs_libtorch:
        lines.append("# The libtorch is nixpkgs' libtorch-bin: its version is the one this nixpkgs carries.")
    lines += ["{", f"  description = {nix_str(description)};", ""]
    lines += [f"  inputs.nixpkgs.url = {nix_str(NIXPKGS_URL)};", "", "  outputs = { self, nixpkgs }:", "    let"]
    if nixpkgs_libtorch:
        lines += [f"      systems = [ {' '.join(nix_str(s) for s in systems)} ];"]
        if cuda:
            lines += [
                "      # libtorch-bin's CUDA build is unfree and chosen by cudaSupport.",
                "      pkgsFor = system: import nixpkgs { inherit system; config = { allowUnfree = true; cudaSupport = true; }; };",
            ]
        else:
            lines += ["      pkgsFor = system: nixpkgs.legacyPackages.${system};"]
        lines += ["      libtorchFor = system: (pkgsFor system).libtorch-bin;"]
    else:
        lines += [
            "      # The archive the tree was unpacked from; hash is the NAR hash of the unpacked tree.",
            "      sources = {",
            f"        {nix_str(systems[0])} = {{",
            f"          name = {nix_str(_store_name(install))};",
            f"          url = {nix_str(url)};",
            f"          hash = {nix_str(nar)};",
            *([] if strip_root else ["          stripRoot = false;  # the archive has no single top folder"]),
            "        };",
            "      };",
            "      systems = builtins.attrNames sources;",
            "      pkgsFor = system: nixpkgs.legacyPackages.${system};",
            "      libtorchFor = system: (pkgsFor system).fetchzip sources.${system};",
        ]
    lines += [
        "      forAllSystems = nixpkgs.lib.genAttrs systems;",
        "    in",
        "    {",
        "      packages = forAllSystems (system: rec {",
        "        libtorch = libtorchFor system;",
        "        default = libtorch;",
        "      });",
        "",
        "      devShells = forAllSystems (system:",
        "        let",
        "          pkgs = pkgsFor system;",
        "          libtorch = libtorchFor system;",
    ]
    if nixpkgs_libtorch:
        lines.append("          dev = pkgs.lib.getDev libtorch;  # headers and share/cmake live in `dev`")
    lines += ["        in", "        {", "          default = pkgs.mkShell {"]
    for name, value in _shell_vars(install, nixpkgs_libtorch, "Darwin" if darwin_only else "Linux"):
        expr = _with_refs(value)
        if name in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"):
            if not (linux_only or darwin_only):
                name = '${if pkgs.stdenv.hostPlatform.isDarwin then "DYLD_LIBRARY_PATH" else "LD_LIBRARY_PATH"}'
            extra = []
            if linux_only and not nixpkgs_libtorch:
                # The official archive's libraries are not patched for Nix: give them libstdc++.
                extra.append('"${pkgs.stdenv.cc.cc.lib}/lib"')
            if cuda:
                extra.append(nix_str(NIXOS_DRIVER_LIB) + "  # libcuda.so.1 from the NixOS driver")
            if extra:
                lines.append(f'            {name} = pkgs.lib.concatStringsSep ":" [')
                lines.append(f"              {expr}")
                lines += [f"              {e}" for e in extra]
                lines.append("            ];")
                continue
        lines.append(f"            {name} = {expr};")
    lines += ["          };", "        });", "    };", "}"]
    return "\n".join(lines) + "\n"
