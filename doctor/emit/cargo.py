"""A `.cargo/config.toml` `[env]` table for tch-rs (torch-sys reads LIBTORCH*, LIBTORCH_CXX11_ABI).

Cargo's [env] cannot prepend, so the loader variable (for `cargo run` / `cargo test`) holds
the lib dir followed by its value where `doctor emit` ran, with `force = true` so that it
wins over an outer value that lacks the lib dir.
"""

from __future__ import annotations

from doctor.emit._common import header_lines, refuse_control
from doctor.emit.variables import apply, loader_variable, variables
from doctor.host import Host

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


def render(install, host: Host) -> str:
    vars = variables(install, host.system)
    refuse_control([v.value for v in vars], ".cargo/config.toml")
    env = apply(vars, host.env, host.system)
    loader = loader_variable(host.system)
    lines = ["# " + line for line in header_lines(install, "doctor emit cargo")]
    lines += ["# Put in .cargo/config.toml (merge with an existing [env] table).", "", "[env]"]
    lines += [f"{v.name} = {toml_str(v.value)}" for v in vars if v.name in TCH_NAMES]
    lines.append(f"{loader} = {{ value = {toml_str(env[loader])}, force = true }}")
    return "\n".join(lines) + "\n"
