"""A small, strict stand-in for the GitHub Actions runner, enough to run our action and the
workflow recipes of docs/ci.md step by step in real bash.

What it does like the runner: fresh $GITHUB_OUTPUT / $GITHUB_ENV / $GITHUB_PATH files per step,
read back after the step (`NAME=value` and `NAME<<DELIM` blocks); env and PATH additions carried
to later steps; `bash --noprofile --norc -eo pipefail`; `if:` conditions; `${{ }}` expressions
in `env:`, `with:` and `if:`; a failing step stops the job. Expressions it does not understand
raise, so a test can never pass on a misread condition. `uses:` steps are not run; a test
supplies their outputs (e.g. a cache hit), or — for our own action — runs it as a composite.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!)|(?P<name>[A-Za-z_][A-Za-z0-9_.-]*(?:\(\))?))")


class Unsupported(Exception):
    pass


@dataclass
class StepResult:
    name: str
    ran: bool
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class Job:
    workdir: Path  # the workspace; also $RUNNER_TEMP lives under it
    env: dict[str, str]  # the job's environment before any step
    action_path: Path | None = None
    inputs: dict[str, str] = field(default_factory=dict)
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"outputs": {...}}
    added_env: dict[str, str] = field(default_factory=dict)
    added_path: list[str] = field(default_factory=list)
    results: list[StepResult] = field(default_factory=list)
    failed: bool = False
    context: dict[str, str] = field(default_factory=dict)  # "github.event_name" -> "pull_request", ...

    # -- expressions --

    def lookup(self, name: str) -> Any:
        if name in ("true", "false"):
            return name == "true"
        if name in ("success()", "always()"):
            return not self.failed if name == "success()" else True
        if name == "failure()":
            return self.failed
        head, _, rest = name.partition(".")
        if head == "inputs":
            if rest not in self.inputs:
                raise Unsupported(f"unknown input {rest!r}")
            return self.inputs[rest]
        if head == "steps":
            step_id, _, tail = rest.partition(".outputs.")
            if not tail:
                raise Unsupported(name)
            return self.steps.get(step_id, {}).get("outputs", {}).get(tail, "")
        if name in self.context:
            return self.context[name]
        if name == "runner.temp":
            return str(self.workdir / "_temp")
        if name == "runner.os":
            return "Linux"
        if name == "github.action_path":
            return str(self.action_path)
        if name == "github.workspace":
            return str(self.workdir)
        raise Unsupported(f"expression {name!r}")

    def evaluate(self, expression: str) -> Any:
        tokens = []
        pos = 0
        while pos < len(expression):
            m = TOKEN.match(expression, pos)
            if not m or m.end() == pos:
                if expression[pos:].strip():
                    raise Unsupported(f"cannot parse {expression!r} at {expression[pos:]!r}")
                break
            pos = m.end()
            if m.group("str") is not None:
                tokens.append(("value", m.group("str")[1:-1].replace("''", "'")))
            elif m.group("op"):
                tokens.append(("op", m.group("op")))
            else:
                tokens.append(("value", self.lookup(m.group("name"))))
        # or-of-ands of (value [==|!= value]) with optional leading !
        disjuncts = _split(tokens, "||")
        return any(all(self._clause(c) for c in _split(d, "&&")) for d in disjuncts)

    def _clause(self, tokens: list) -> bool:
        negate = False
        while tokens and tokens[0] == ("op", "!"):
            negate, tokens = not negate, tokens[1:]
        if len(tokens) == 1 and tokens[0][0] == "value":
            result = _truthy(tokens[0][1])
        elif len(tokens) == 3 and tokens[1] in (("op", "=="), ("op", "!=")):
            a, b = str(tokens[0][1]).lower(), str(tokens[2][1]).lower()  # GitHub compares strings case-insensitively
            result = (a == b) == (tokens[1][1] == "==")
        else:
            raise Unsupported(f"clause {tokens!r}")
        return result != negate

    def substitute(self, text: str) -> str:
        def one(m: re.Match) -> str:
            value = self.evaluate(m.group(1)) if re.search(r"==|!=|&&|\|\|", m.group(1)) else self._single(m.group(1))
            return str(value).lower() if isinstance(value, bool) else str(value)

        return EXPR.sub(one, str(text))

    def _single(self, expression: str) -> Any:
        m = TOKEN.fullmatch(expression.strip())
        if not m:
            raise Unsupported(expression)
        if m.group("str") is not None:
            return m.group("str")[1:-1]
        return self.lookup(m.group("name"))

    def condition(self, text: Any) -> bool:
        if text is None:
            return not self.failed
        if isinstance(text, bool):
            return text
        inner = EXPR.fullmatch(str(text).strip())
        ok = self.evaluate(inner.group(1) if inner else str(text))
        # Without a status function GitHub adds success().
        return ok and (not self.failed or re.search(r"always\(\)|failure\(\)", str(text)) is not None)

    # -- running --

    def run_steps(self, steps: list[dict], uses: Callable[["Job", dict], dict[str, str]] | None = None) -> None:
        for step in steps:
            # GitHub's own names for unnamed steps: the action, or "Run" and the script's first line
            name = step.get("name") or (step["uses"] if "uses" in step else f"Run {str(step.get('run', '')).splitlines()[0]}")
            if not self.condition(step.get("if")):
                self.results.append(StepResult(name, False))
                continue
            if "uses" in step:
                outputs = (uses or (lambda job, s: {}))(self, step)
                self.results.append(StepResult(name, True, outputs=outputs))
                if step.get("id"):
                    self.steps[step["id"]] = {"outputs": outputs}
                continue
            if step.get("shell", "bash") != "bash":
                raise Unsupported(f"shell {step.get('shell')!r}")
            self._run(name, step)
            if self.failed:
                continue

    def _run(self, name: str, step: dict) -> None:
        temp = self.workdir / "_temp"
        temp.mkdir(parents=True, exist_ok=True)
        files = {var: temp / f"{var.lower()}_{len(self.results)}" for var in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH")}
        for path in files.values():
            path.write_text("")
        env = dict(self.env)
        env.update(self.added_env)
        env["PATH"] = os.pathsep.join([*reversed(self.added_path), env.get("PATH", "")])
        env.update({k: self.substitute(v) for k, v in (step.get("env") or {}).items()})
        env.update({k: str(v) for k, v in files.items()})
        env.setdefault("RUNNER_TEMP", str(temp))
        env.setdefault("GITHUB_WORKSPACE", str(self.workdir))
        script = temp / f"step_{len(self.results)}.sh"
        script.write_text(step["run"])
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workdir / step.get("working-directory", "."),
            env=env, capture_output=True, text=True, timeout=120,
        )
        outputs = parse_env_file(files["GITHUB_OUTPUT"].read_text())
        self.added_env.update(parse_env_file(files["GITHUB_ENV"].read_text()))
        self.added_path += [line for line in files["GITHUB_PATH"].read_text().splitlines() if line.strip()]
        if step.get("id"):
            self.steps[step["id"]] = {"outputs": outputs}
        self.results.append(StepResult(name, True, proc.returncode, proc.stdout, proc.stderr, outputs))
        self.failed = self.failed or proc.returncode != 0


def _split(tokens: list, op: str) -> list[list]:
    parts, current = [], []
    for token in tokens:
        if token == ("op", op):
            parts.append(current)
            current = []
        else:
            current.append(token)
    parts.append(current)
    return parts


def _truthy(value: Any) -> bool:
    return bool(value) and value not in ("false", "0")


def parse_env_file(text: str, windows: bool = False) -> dict[str, str]:
    """The runner's reading of $GITHUB_ENV and $GITHUB_OUTPUT, ported line for line from
    actions/runner src/Runner.Worker/FileCommandManager.cs (SetEnvFileCommand.ProcessCommand and
    ReadLine): lines end at \\n (and at \\r\\n on Windows only); `NAME=value` when '=' comes
    before any '<<'; otherwise `NAME<<DELIM` takes the exact text up to the next line equal to
    DELIM; an unterminated block or a line with neither is an error that fails the step."""
    out: dict[str, str] = {}
    index = 0

    def read_line() -> tuple[str | None, str | None]:
        nonlocal index
        if index >= len(text):
            return None, None
        start = index
        lf = text.find("\n", index)
        if lf < 0:
            index = len(text)
            return text[start:], None
        crlf = text.find("\r\n", index) if windows else -1
        if 0 <= crlf < lf:
            index = crlf + 2
            return text[start:crlf], "\r\n"
        index = lf + 1
        return text[start:lf], "\n"

    line, _ = read_line()
    while line is not None:
        if line:
            equals, heredoc = line.find("="), line.find("<<")
            if equals >= 0 and (heredoc < 0 or equals < heredoc):
                name, value = line.split("=", 1)
                out[name] = value
            elif heredoc >= 0 and (equals < 0 or heredoc < equals):
                name, delimiter = line.split("<<", 1)
                if not name or not delimiter:
                    raise ValueError(f"Invalid format {line!r}: empty name or delimiter")
                start = end = index
                temp, newline = read_line()
                while temp != delimiter:
                    if temp is None:
                        raise ValueError(f"Matching delimiter not found {delimiter!r}")
                    end = index - len(newline or "")
                    temp, newline = read_line()
                out[name] = text[start:end] if end > start else ""
            else:
                raise ValueError(f"Invalid format {line!r}")
        line, _ = read_line()
    return out


def action_inputs(action: Mapping, given: Mapping[str, str]) -> dict[str, str]:
    unknown = set(given) - set(action.get("inputs") or {})
    if unknown:
        raise Unsupported(f"inputs not declared by the action: {sorted(unknown)}")
    return {name: str(given.get(name, spec.get("default", ""))) for name, spec in (action.get("inputs") or {}).items()}


def run_composite(action: Mapping, action_path: Path, job: Job, given: Mapping[str, str],
                  uses: Callable[[Job, dict], dict[str, str]] | None = None) -> dict[str, str]:
    """Run a composite action inside `job` (sharing its env and PATH additions); its outputs."""
    inner = Job(job.workdir, job.env, action_path, action_inputs(action, given), {}, job.added_env, job.added_path,
                job.results, job.failed, job.context)
    inner.run_steps(action["runs"]["steps"], uses)
    job.failed = inner.failed
    return {name: inner.substitute(spec["value"]) for name, spec in (action.get("outputs") or {}).items()}
