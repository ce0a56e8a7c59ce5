"""GitHub Actions: `NAME=value` lines for $GITHUB_ENV and directories for $GITHUB_PATH.

$GITHUB_ENV cannot refer to a variable's current value, so prepended variables are written
in full over the environment of the step that runs `doctor emit github`; PATH itself goes
through $GITHUB_PATH, which the runner prepends for every later step.
"""

from __future__ import annotations

from doctor.emit._common import header_lines, refuse_control
from doctor.emit.variables import apply, variables
from doctor.host import Host


def lines(install, host: Host) -> tuple[list[str], list[str]]:
    """(lines for $GITHUB_ENV, lines for $GITHUB_PATH)."""
    vars = variables(install, host.system)
    refuse_control([v.value for v in vars], "$GITHUB_ENV")
    env = apply(vars, host.env, host.system)
    env_lines, path_lines = [], []
    for name in dict.fromkeys(v.name for v in vars):
        if name == "PATH":
            path_lines += [e for v in vars if v.name == "PATH" for e in v.elements(host.system)]
        else:
            env_lines.append(f"{name}={env[name]}")
    return env_lines, path_lines


def render(install, host: Host) -> str:
    env_lines, path_lines = lines(install, host)
    out = ["# " + line for line in header_lines(install, "doctor emit github")]
    out += ["# lines for $GITHUB_ENV", *env_lines]
    if path_lines:
        out += ["# lines for $GITHUB_PATH", *path_lines]
    return "\n".join(out) + "\n"


def write(install, host: Host) -> list[str]:
    """Append to the files $GITHUB_ENV / $GITHUB_PATH name; returns what was written where."""
    env_lines, path_lines = lines(install, host)
    done = []
    for var, new in (("GITHUB_ENV", env_lines), ("GITHUB_PATH", path_lines)):
        target = host.env.get(var)
        if target and new:
            with open(host.real(target), "a", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in new))
            done.append(f"{len(new)} line(s) appended to ${var} ({target})")
    return done
