"""GitHub Actions: variables for $GITHUB_ENV and directories for $GITHUB_PATH.

$GITHUB_ENV cannot refer to a variable's current value, so prepended variables are written
in full over the environment of the step that runs `doctor emit github` (whatever that
environment holds: every value goes through the runner's `NAME<<DELIMITER` syntax, so a
newline in an inherited LD_LIBRARY_PATH cannot start a variable of its own); PATH itself goes
through $GITHUB_PATH, which the runner prepends for every later step.
"""

from __future__ import annotations

from doctor.emit._common import header_lines
from doctor.emit.variables import apply, variables
from doctor.host import Host
from doctor.quoting import github_env_block, github_path_line


def blocks(install, host: Host) -> tuple[list[str], list[str]]:
    """(blocks for $GITHUB_ENV, lines for $GITHUB_PATH), each ending in a newline."""
    vars = variables(install, host.system)
    env = apply(vars, host.env, host.system)
    env_blocks, path_lines = [], []
    for name in dict.fromkeys(v.name for v in vars):
        if name == "PATH":
            path_lines += [github_path_line(e) for v in vars if v.name == "PATH" for e in v.elements(host.system)]
        else:
            env_blocks.append(github_env_block(name, env[name], host.system))
    return env_blocks, path_lines


def render(install, host: Host) -> str:
    env_blocks, path_lines = blocks(install, host)
    out = "".join(f"# {line}\n" for line in header_lines(install, "doctor emit github"))
    out += "# for $GITHUB_ENV\n" + "".join(env_blocks)
    if path_lines:
        out += "# for $GITHUB_PATH\n" + "".join(path_lines)
    return out


def write(install, host: Host) -> list[str]:
    """Append to the files $GITHUB_ENV / $GITHUB_PATH name; returns what was written where.

    Everything is computed (and refused) before the first byte is written, so a refusal leaves
    both files as they were."""
    env_blocks, path_lines = blocks(install, host)
    done = []
    for var, new in (("GITHUB_ENV", env_blocks), ("GITHUB_PATH", path_lines)):
        target = host.env.get(var)
        if target and new:
            append(host, var, target, "".join(new))
            done.append(f"{len(new)} {'variable' if var == 'GITHUB_ENV' else 'path'}(s) appended to ${var} ({target})")
    return done


def append(host: Host, var: str, target: str, text: str) -> None:
    """One append through the Host door (same root mapping and error translation as reads)."""
    host.append(target, text, doing=f"append to ${var}",
                instead=f"${var} must name a writable file (the runner sets it); "
                        "run `doctor emit github` without it to print the lines")
