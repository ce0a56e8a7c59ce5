"""action.yml: valid YAML, only documented doctor commands and flags, and its steps run in order
in real bash with fake $GITHUB_ENV / $GITHUB_OUTPUT / $GITHUB_STEP_SUMMARY, `doctor check` for real."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from testsupport.ci_support import REPO, fetch_into, runner_env, shim_bin
from testsupport.gha_runner import Job, run_composite

from doctor.cli import COMMANDS

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
KEY = re.compile(r"^libtorch-2\.13\.0-cpu-cxx11-linux-x86_64-[0-9a-f]{8}$")


def doctor_calls(script: str) -> list[list[str]]:
    """Every `doctor …` command line in a shell script, as words (continuations joined)."""
    calls = []
    for line in script.replace("\\\n", " ").splitlines():
        for m in re.finditer(r"(?:^|[;&|(]|\$\(|\bthen\b|\bdo\b)\s*(doctor\s[^;&|)#]*)", line):
            calls.append(shlex.split(m.group(1), posix=True, comments=True))
    return calls


def test_action_is_a_composite_action():
    assert ACTION["runs"]["using"] == "composite"
    for step in ACTION["runs"]["steps"]:
        assert "run" in step or "uses" in step
        if "run" in step:
            assert step["shell"] == "bash"  # composite steps must name their shell
            assert "${{" not in step["run"], "inputs reach scripts through env:, never ${{ }} in run:"
        else:
            assert re.fullmatch(r"actions/[a-z-]+@v\d+", step["uses"])


@pytest.mark.parametrize("step", [s for s in ACTION["runs"]["steps"] if "run" in s], ids=lambda s: s["name"])
def test_run_steps_pass_shellcheck(step):
    result = subprocess.run(["shellcheck", "--shell=bash", "-"], input=step["run"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def help_of(name: str) -> str:
    result = subprocess.run([sys.executable, "-m", "doctor", name, "--help"], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    assert result.returncode == 0, f"doctor {name} --help failed: {result.stderr}"
    return result.stdout


def test_run_steps_call_only_documented_commands_and_flags():
    called = set()
    for step in (s for s in ACTION["runs"]["steps"] if "run" in s):
        commands = {c[1] for c in doctor_calls(step["run"])}
        if not commands:
            continue  # the pip step
        assert commands <= set(COMMANDS), f"undocumented command in {step['name']!r}: {commands - set(COMMANDS)}"
        called |= commands
        # every --flag in the script (also those collected in bash arrays) belongs to a command it calls
        helps = " ".join(help_of(c) for c in commands)
        for flag in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", step["run"])):
            assert re.search(rf"{flag}\b", helps), f"{step['name']!r} passes {flag}, which doctor {commands} lacks"
    assert called == {"cache-key", "fetch-libtorch", "emit", "check"}


def run_action(tmp_path: Path, inputs: dict[str, str], cache_hit: bool = True, archive: Path | None = None
               ) -> tuple[Job, dict, list]:
    home = tmp_path / "home"
    home.mkdir()
    restored = fetch_into(home, archive, tmp_path / "earlier-run") if cache_hit else None
    workdir = tmp_path / "work"
    workdir.mkdir()
    shims = shim_bin(tmp_path)
    env = runner_env(tmp_path, home, shims, GITHUB_ACTIONS="true", CI="true",
                     GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    cache_calls = []

    def uses(job: Job, step: dict) -> dict[str, str]:
        with_ = {k: job.substitute(v) for k, v in (step.get("with") or {}).items()}
        cache_calls.append((step["uses"], with_))
        return {"cache-hit": "true" if restored else "false"}

    job = Job(workdir, env)
    outputs = run_composite(ACTION, REPO, job, inputs, uses)
    return job, outputs, cache_calls


def by_name(job: Job) -> dict:
    return {r.name: r for r in job.results}


def test_action_with_a_restored_cache_checks_for_real(tmp_path, libtorch_zip):
    job, outputs, cache_calls = run_action(
        tmp_path, {"version": "2.13.0", "variant": "cpu", "require": "libtorch==2.13.*\n  abi=cxx11\n\nvariant=cpu\n"},
        archive=libtorch_zip)
    steps = by_name(job)
    assert [(r.name, r.ran) for r in job.results] == [
        ("Install torch-doctor", True),
        ("Cache key for libtorch", True),
        ("Restore cached libtorch", True),
        ("Fetch libtorch", False),  # the cache hit makes the download unnecessary
        ("Environment for later steps", True),
        ("Check libtorch", True),
    ]
    failed = [(r.name, r.returncode, r.stderr) for r in job.results if r.returncode]
    assert not failed and not job.failed, failed
    assert (tmp_path / "shims/pip-installs").read_text().split() == ["--disable-pip-version-check", "--quiet", "torch-doctor"]

    # the cache is keyed by `doctor cache-key` and holds LIBTORCH_HOME
    key = steps["Cache key for libtorch"].outputs["key"]
    assert KEY.match(key) and outputs["cache-key"] == key
    assert cache_calls == [("actions/cache@v4", {"path": "~/.cache/libtorch", "key": key})]

    # later steps get the environment of the restored tree
    tree = tmp_path / "home/.cache/libtorch/2.13.0/linux-x86_64/cpu"
    assert job.added_env["LIBTORCH"] == str(tree)
    assert job.added_env["LIBTORCH_HOME"] == str(tmp_path / "home/.cache/libtorch")
    assert str(tree / "lib") in job.added_env["LD_LIBRARY_PATH"].split(":")

    # `doctor check` ran with the three requirements, against that tree, and passed
    report = json.loads(Path(outputs["report"]).read_text())
    assert report["exit_code"] == 0
    assert report["facts"]["libtorch"]["candidates"][report["facts"]["libtorch"]["active"]]["root"] == str(tree)
    requirements = next(a for a in report["areas"] if a["name"] == "requirements")
    assert requirements["summary"] == "3 of 3 met"
    check = steps["Check libtorch"]
    assert "::stop-commands::" in check.stdout and not re.search(r"^::error ", check.stdout, re.M)
    assert "### ✅ torch-doctor check: passed" in (tmp_path / "summary.md").read_text()


def test_action_fetches_on_a_cache_miss(tmp_path, libtorch_zip):
    job, outputs, _ = run_action(tmp_path, {"version": "2.13.0", "archive": str(libtorch_zip), "install": "",
                                            "require": "libtorch==2.13.0"}, cache_hit=False)
    steps = by_name(job)
    fetch = steps["Fetch libtorch"]
    assert fetch.ran and fetch.returncode == 0, fetch.stderr
    assert fetch.stdout.startswith("Installed libtorch 2.13.0+cpu (cxx11 ABI, linux-x86_64)")
    tree = tmp_path / "home/.cache/libtorch/2.13.0/linux-x86_64/cpu"
    assert job.added_env["LIBTORCH"] == str(tree)
    assert steps["Check libtorch"].returncode == 0 and not job.failed, steps["Check libtorch"].stdout


def test_action_fails_the_job_on_an_unmet_requirement(tmp_path, libtorch_zip):
    job, outputs, _ = run_action(tmp_path, {"version": "2.13.0", "require": "abi=pre-cxx11", "install": ""},
                                 archive=libtorch_zip)
    steps = by_name(job)
    assert not steps["Install torch-doctor"].ran
    check = steps["Check libtorch"]
    assert check.returncode == 1 and job.failed
    errors = re.findall(r"^::error title=([^:]*)::", check.stdout, re.M)
    assert "requirement not met%3A abi=pre-cxx11 [requirement.unmet]" in errors
    assert "### ❌ torch-doctor check: failed" in (tmp_path / "summary.md").read_text()


def test_action_without_fetch_checks_what_is_installed(tmp_path):
    job, outputs, cache_calls = run_action(tmp_path, {"require": "torch==2.13.*", "install": ""}, cache_hit=False)
    assert [r.name for r in job.results if r.ran] == ["Environment for later steps", "Check libtorch"]
    assert cache_calls == [] and outputs["cache-key"] == ""
    assert not job.failed, [(r.name, r.stderr) for r in job.results]
    assert "LIBTORCH_VERSION" not in job.added_env


def test_action_malformed_requirement_exits_2(tmp_path):
    job, _, _ = run_action(tmp_path, {"require": "libtorch=>2", "install": ""}, cache_hit=False)
    check = by_name(job)["Check libtorch"]
    assert check.returncode == 2 and "libtorch=>2" in check.stderr


@pytest.mark.parametrize("name", ["require", "version", "variant", "strict", "install", "cache", "libtorch-home",
                                  "archive", "mirror"])
def test_inputs_are_documented(name):
    assert ACTION["inputs"][name]["description"].strip()


def test_action_failing_cache_key_fails_the_step_without_an_empty_key(tmp_path):
    job, outputs, cache_calls = run_action(tmp_path, {"version": "2.13.0", "variant": "bogus", "install": ""},
                                           cache_hit=False)
    key_step = by_name(job)["Cache key for libtorch"]
    assert key_step.returncode == 2 and "'bogus' is not a libtorch variant" in key_step.stderr
    assert job.failed and "key" not in key_step.outputs and outputs["cache-key"] == ""
    assert cache_calls == []  # nothing restored or saved under an empty key
    assert [r.name for r in job.results if r.ran] == ["Cache key for libtorch"]


def test_action_inputs_with_newlines_cannot_set_variables(tmp_path, libtorch_zip):
    """A newline in an input would end `NAME=value` and start `LD_PRELOAD=…`; the NAME<<DELIM blocks
    carry it as part of the value, read back by the runner's own parsing (gha_runner.parse_env_file)."""
    home_input = "~/.cache/libtorch\nLD_PRELOAD=/tmp/evil.so\nghadelimiter_0"
    job, _, _ = run_action(tmp_path, {"version": "2.13.0", "libtorch-home": home_input, "install": "",
                                      "require": "libtorch==2.13.*"}, archive=libtorch_zip)
    env_step = by_name(job)["Environment for later steps"]
    assert env_step.returncode == 0, env_step.stderr
    assert "LD_PRELOAD" not in job.added_env
    assert job.added_env["LIBTORCH_HOME"] == home_input.replace("~", str(tmp_path / "home"), 1)
    assert by_name(job)["Check libtorch"].outputs["report"].endswith("torch-doctor-report.json")
