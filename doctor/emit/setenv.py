"""`setenv` for sh/bash/zsh, fish, PowerShell, cmd and dotenv, from the same list of `Var`s.

Shell files prepend through a small function that moves our elements to the front, drops
any copy of them and any empty element, so sourcing twice changes nothing and the loader
never sees "" (which it reads as the current directory). Values are single-quoted for the
shell at hand, so spaces, quotes, `$` and backslashes reach the variable unchanged.
"""

from __future__ import annotations

import os

from doctor.emit._common import header_lines, refuse_control
from doctor.quoting import dotenv_line, fish_quote, pwsh_quote, sh_quote
from doctor.emit.variables import Var, apply, separator, variables
from doctor.errors import DoctorError, UsageError
from doctor.host import Host

SHELLS = ("sh", "bash", "zsh", "fish", "pwsh", "cmd", "dotenv")
_ALIASES = {"dash": "sh", "ksh": "sh", "mksh": "sh", "ash": "sh", "powershell": "pwsh", "cmd.exe": "cmd", "env": "dotenv"}


def default_shell(host: Host) -> str:
    """The shell named by $SHELL (basename), or a sensible one for the platform."""
    name = _login_shell(host)
    if name in SHELLS:
        return name
    return "pwsh" if host.system == "Windows" else "sh"


def unwritten_shell(host: Host) -> str | None:
    """$SHELL's name when it is a shell setenv does not write for (tcsh, csh, nu, xonsh, elvish):
    they get sh syntax, which their `eval` rejects, so the command says so."""
    name = _login_shell(host)
    return name if name and name not in SHELLS else None


def _login_shell(host: Host) -> str:
    name = os.path.basename(host.env.get("SHELL", "")).lower()
    name = name.removesuffix(".exe") if name != "cmd.exe" else name
    return _ALIASES.get(name, name)


def render(install, host: Host, shell: str | None = None) -> str:
    shell = (shell or default_shell(host)).lower()
    shell = _ALIASES.get(shell, shell)
    if shell not in SHELLS:
        raise UsageError(f"unknown shell {shell!r} for setenv", "choose one of: " + ", ".join(SHELLS))
    if host.system == "Windows" and shell in ("sh", "bash", "zsh", "fish"):
        # Windows lists are ;-separated with drive letters; POSIX shells there (MSYS) use their own.
        raise UsageError(f"--shell {shell} is not supported on Windows", "use --shell pwsh or --shell cmd")
    vars = variables(install, host.system)
    if shell == "cmd":
        # A batch file is read line by line and has no way to quote a line break.
        refuse_control([v.value for v in vars], "a cmd setenv")
    # sh, fish and pwsh quoting keeps every other byte exactly (control bytes and ESC included);
    # NUL is refused by the quoting functions, dotenv refuses what its readers would change.
    command = f"doctor emit setenv --shell {shell}"
    if shell in ("sh", "bash", "zsh"):
        return render_sh(vars, install, command, shell)
    if shell == "fish":
        return render_fish(vars, install, command)
    if shell == "pwsh":
        return render_pwsh(vars, install, command, host.system)
    if shell == "cmd":
        if host.system != "Windows":
            raise UsageError("--shell cmd is for Windows", "use --shell sh, bash, zsh, fish or pwsh here")
        return render_cmd(vars, install, command)
    return render_dotenv(vars, install, command, host)


def macos_notes(vars: list[Var]) -> list[str]:
    """Comment lines (without the marker) for a macOS setenv: DYLD_LIBRARY_PATH does not reach
    programs under /usr/bin (SIP strips DYLD_* from them), so a build run via make or a shell
    script needs rpaths instead. Empty when no DYLD_LIBRARY_PATH is written."""
    from doctor.emit._common import one_line

    dyld = [v for v in vars if v.name == "DYLD_LIBRARY_PATH"]
    if not dyld:
        return []
    lib = one_line(dyld[0].elements()[0])
    return [
        "macOS: System Integrity Protection strips DYLD_* from programs under /usr/bin, /bin and /sbin",
        "(make, bash and sh scripts, env), so a build or test started through them does not see",
        "DYLD_LIBRARY_PATH. What works everywhere is an rpath in the binary:",
        f"  link with -Wl,-rpath,{lib}",
        f"  CMake: set(CMAKE_BUILD_RPATH \"{lib}\") and set(CMAKE_INSTALL_RPATH \"{lib}\")",
        f"  a built program: install_name_tool -add_rpath {lib} <program>",
    ]


# -- POSIX sh, bash, zsh: one text works in all three (and dash) --


_SH_PREPEND = r"""_torch_doctor_prepend() {
  # usage: _torch_doctor_prepend NAME ELEMENT...  (ELEMENTs first, once; no empty elements)
  _torch_doctor_name=$1
  shift
  eval "_torch_doctor_rest=\${$_torch_doctor_name-}"
  _torch_doctor_new=
  for _torch_doctor_el in "$@"; do
    _torch_doctor_new=${_torch_doctor_new:+$_torch_doctor_new:}$_torch_doctor_el
  done
  while [ -n "$_torch_doctor_rest" ]; do
    _torch_doctor_el=${_torch_doctor_rest%%:*}
    case $_torch_doctor_rest in
      *:*) _torch_doctor_rest=${_torch_doctor_rest#*:} ;;
      *) _torch_doctor_rest= ;;
    esac
    _torch_doctor_keep=${_torch_doctor_el:+1}
    for _torch_doctor_ours in "$@"; do
      if [ "$_torch_doctor_el" = "$_torch_doctor_ours" ]; then _torch_doctor_keep=; fi
    done
    if [ -n "$_torch_doctor_keep" ]; then _torch_doctor_new=$_torch_doctor_new:$_torch_doctor_el; fi
  done
  eval "export $_torch_doctor_name=\"\$_torch_doctor_new\""
  unset _torch_doctor_name _torch_doctor_rest _torch_doctor_new _torch_doctor_el _torch_doctor_keep _torch_doctor_ours
}"""


def render_sh(vars: list[Var], install, command: str, shell: str = "sh") -> str:
    directive = f"# shellcheck shell={'bash' if shell == 'bash' else 'sh'}"
    if any(c in v.value for v in vars for c in "$`"):
        # SC2016 warns that $ does not expand in single quotes: here that is the point.
        directive += " disable=SC2016"
    lines = [directive]
    lines += ["# " + line for line in header_lines(install, command)]
    lines += ["# " + line for line in macos_notes(vars)]
    lines += ['# Use: . ./setenv.sh   or   eval "$(doctor emit setenv)"', ""]
    lines += [f"export {v.name}={sh_quote(v.value)}" for v in vars if v.mode == "set"]
    prepends = [v for v in vars if v.mode == "prepend"]
    if prepends:
        lines += ["", _SH_PREPEND]
        lines += [f"_torch_doctor_prepend {v.name} " + " ".join(map(sh_quote, v.elements())) for v in prepends]
        lines += ["unset -f _torch_doctor_prepend"]
    return "\n".join(lines) + "\n"


# -- fish --


_FISH_PREPEND = """function _torch_doctor_prepend --argument-names name
    # usage: _torch_doctor_prepend NAME ELEMENT...  (ELEMENTs first, once; no empty elements)
    set -l ours $argv[2..-1]
    set -l new $ours
    # Names ending in PATH are fish path variables: $$name is already the list of elements
    # (split on ':' on import). No `string split`: its output is split again on newlines.
    for el in $$name
        if test -n "$el"; and not contains -- $el $ours
            set -a new $el
        end
    end
    set -gx $name $new
end"""


def render_fish(vars: list[Var], install, command: str) -> str:
    lines = ["# " + line for line in header_lines(install, command)]
    lines += ["# " + line for line in macos_notes(vars)]
    lines += ["# Use: source setenv.fish   or   doctor emit setenv --shell fish | source", ""]
    lines += [f"set -gx {v.name} {fish_quote(v.value)}" for v in vars if v.mode == "set"]
    prepends = [v for v in vars if v.mode == "prepend"]
    for v in prepends:
        if not v.name.endswith("PATH"):
            # A fish variable is split on ':' only when its name ends in PATH.
            raise DoctorError(f"fish cannot prepend to {v.name}", "use --shell pwsh or cmd on Windows",
                              error_id="emit.unrepresentable")
    if prepends:
        lines += ["", _FISH_PREPEND]
        lines += [f"_torch_doctor_prepend {v.name} " + " ".join(map(fish_quote, v.elements())) for v in prepends]
        lines += ["functions -e _torch_doctor_prepend"]
    return "\n".join(lines) + "\n"


# -- PowerShell --


def render_pwsh(vars: list[Var], install, command: str, system: str) -> str:
    sep = separator(system)
    # Windows compares paths case-insensitively; elsewhere they are distinct names.
    notcontains = "-notcontains" if system == "Windows" else "-cnotcontains"
    lines = ["# " + line for line in header_lines(install, command)]
    lines += ["# " + line for line in macos_notes(vars)]
    lines += ["# Use: . ./setenv.ps1", ""]
    lines += [f"$env:{v.name} = {pwsh_quote(v.value)}" for v in vars if v.mode == "set"]
    prepends = [v for v in vars if v.mode == "prepend"]
    if prepends:
        lines += [
            "",
            "function _TorchDoctorPrepend([string]$Name, [string[]]$Ours) {",
            "    # Ours first, once; existing copies and empty elements dropped.",
            "    $old = [Environment]::GetEnvironmentVariable($Name)",
            f"    $rest = @(if ($old) {{ $old.Split({pwsh_quote(sep)}) | Where-Object {{ $_ -and $Ours {notcontains} $_ }} }})",
            f"    [Environment]::SetEnvironmentVariable($Name, ((@($Ours) + $rest) -join {pwsh_quote(sep)}))",
            "}",
        ]
        for v in prepends:
            items = ", ".join(pwsh_quote(e) for e in v.elements(system))
            lines.append(f"_TorchDoctorPrepend {pwsh_quote(v.name)} @({items})")
        lines.append("Remove-Item Function:_TorchDoctorPrepend")
    return "\n".join(lines) + "\n"


# -- cmd.exe (a .cmd file to `call`) --

# `%X:find=repl%` ends its find text at the first = or %; a " would end the quoted `set`.
_CMD_UNSAFE_IN_PREPEND = '%="'


def cmd_escape(value: str) -> str:
    # Inside `set "NAME=value"` the quotes protect & | < > ^ ( ); in a batch file % must be doubled.
    if '"' in value:
        raise DoctorError(f"cmd cannot carry a double quote in {value!r}", "use --shell pwsh",
                          error_id="emit.unrepresentable")
    return value.replace("%", "%%")


def render_cmd(vars: list[Var], install, command: str) -> str:
    # Batch files expand % even in rem lines.
    lines = ["@echo off"] + ["rem " + line.replace("%", "%%") for line in header_lines(install, command)]
    lines += ["rem Use: call setenv.cmd", ""]
    lines += [f'set "{v.name}={cmd_escape(v.value)}"' for v in vars if v.mode == "set"]
    for v in (v for v in vars if v.mode == "prepend"):
        # Prepend the last element first so the elements end up in their order at the front.
        for el in reversed(v.elements("Windows")):
            if any(c in el for c in _CMD_UNSAFE_IN_PREPEND):
                raise DoctorError(f"cmd cannot prepend {el!r} (it contains one of {_CMD_UNSAFE_IN_PREPEND})", "use --shell pwsh",
                                  error_id="emit.unrepresentable")
            n = v.name
            lines += [
                f'set "_torch_doctor=;%{n}%;"',
                # %X:a=b% replaces every copy, case-insensitively (as Windows compares paths).
                f'set "_torch_doctor=%_torch_doctor:;{el};=;%"',
                'set "_torch_doctor=%_torch_doctor:;;=;%"',
                'set "_torch_doctor=%_torch_doctor:;;=;%"',
                'set "_torch_doctor=%_torch_doctor:;;=;%"',
                # ";rest;" minus its last character is ";rest"; a bare ";" (nothing else) leaves "".
                f'set "{n}={el}%_torch_doctor:~0,-1%"',
            ]
    lines.append('set "_torch_doctor="')
    return "\r\n".join(lines) + "\r\n"


# -- dotenv --


def render_dotenv(vars: list[Var], install, command: str, host: Host) -> str:
    """KEY=value lines, exact under python-dotenv and `docker --env-file` (doctor.quoting.dotenv_line).
    dotenv cannot refer to the current value, so prepended variables are written in full, over
    the environment `doctor emit` ran in (a snapshot); what that holds is checked like our paths."""
    env = apply(vars, host.env, host.system)
    lines = ["# " + line for line in header_lines(install, command)]
    lines += ["# Prepended variables hold their full value as of when this file was written.", ""]
    for name in dict.fromkeys(v.name for v in vars):
        lines.append(dotenv_line(name, env[name]))
    return "\n".join(lines) + "\n"
