"""A `.cargo/config.toml` for tch-rs: an `[env]` table (torch-sys reads LIBTORCH*,
LIBTORCH_CXX11_ABI) and `[build] rustflags` with the link arguments a binary needs.

- rpath (`-Wl,-rpath,<lib>`; `-Xlinker -rpath -Xlinker <lib>` when <lib> holds a comma, at
  which cc would split `-Wl,`): `cargo run` / `cargo test` and the built binary find libtorch
  without LD_LIBRARY_PATH (torch-sys passes -Wl,-rpath only to its own C++ compile, which does
  not reach the final link).
- CUDA / ROCm trees: `-Wl,--no-as-needed -ltorch_cuda` — nothing in a Rust binary references a
  libtorch_cuda symbol, so the linker's --as-needed would drop it and the program fails with
  "Cannot initialize CUDA without ATen_cuda library" (tch-rs's build.rs comments on exactly this).

Cargo's [env] cannot prepend, so the loader variable holds the lib dir followed by its value
where `doctor emit` ran, with `force = true`. RUSTFLAGS in the environment, or a
`[target.<triple>] rustflags` elsewhere, replaces `[build] rustflags` (Cargo's precedence).
"""

from __future__ import annotations

from doctor.emit._common import header_lines, refuse_control
from doctor.emit.variables import apply, loader_variable, variables
from doctor.host import Host
from doctor.quoting import rpath_words

TCH_NAMES = ("LIBTORCH", "LIBTORCH_INCLUDE", "LIBTORCH_LIB", "LIBTORCH_CXX11_ABI")


def toml_str(value: str) -> str:
    """A TOML basic string: escape backslash, quote and the control characters TOML forbids."""
    out = []
    for c in value:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def link_args(install, system: str) -> list[str]:
    """rustc `-C link-arg=` values (and `-L`) for a binary linking this libtorch."""
    lib = str(install.lib_dir)
    if system == "Windows":
        return []  # no rpath on Windows: PATH is the loader's search list
    args = rpath_words(lib, system)  # one link-arg a word: rustc hands each to cc as it is
    libraries = set(getattr(install, "libraries", []) or [])
    if system == "Linux":
        gpu = [stem for stem in ("torch_cuda", "torch_hip") if f"lib{stem}.so" in libraries]
        if gpu:
            args += ["-Wl,--no-as-needed", *(f"-l{stem}" for stem in gpu), "-Wl,--as-needed"]
    return args


def render(install, host: Host) -> str:
    vars = variables(install, host.system)
    refuse_control([v.value for v in vars], ".cargo/config.toml")
    env = apply(vars, host.env, host.system)
    loader = loader_variable(host.system)
    lines = ["# " + line for line in header_lines(install, "doctor emit cargo")]
    lines += ["# Put in .cargo/config.toml (merge with an existing [env] table).", "", "[env]"]
    lines += [f"{v.name} = {toml_str(v.value)}" for v in vars if v.name in TCH_NAMES]
    lines.append(f"{loader} = {{ value = {toml_str(env[loader])}, force = true }}")
    args = link_args(install, host.system)
    if args:
        flags = ["-L", f"native={install.lib_dir}"]
        for arg in args:
            flags += ["-C", f"link-arg={arg}"]
        lines += ["", "# rpath so the binary runs without " + loader + "; for CUDA/ROCm trees keep libtorch_cuda/hip",
                  "# linked although no Rust code calls into it (--as-needed would drop it).",
                  "[build]", "rustflags = [" + ", ".join(toml_str(f) for f in flags) + "]"]
    return "\n".join(lines) + "\n"
