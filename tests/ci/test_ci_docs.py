"""The docs: the site builds strictly, and every CI recipe in docs/ci.md and every policy example in
docs/policy.md does what the page says — run in bash, step by step, with `doctor` for real."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from testsupport.ci_support import BUILD_CHECK, REPO, doctor_env, fetch_into, run_doctor, runner_env, shim_bin
from testsupport.gha_runner import Job, run_composite

ACTION = yaml.safe_load((REPO / "action.yml").read_text())


def marked_blocks(page: str, marker: str) -> dict[str, str]:
    """Fenced blocks preceded by `<!-- marker: name -->`, by name."""
    text = (REPO / "docs" / page).read_text()
    pattern = rf"<!-- {marker}: ([^>]+?) -->\n```[a-z]*\n(.*?)```"
    return {name: body for name, body in re.findall(pattern, text, re.S)}


RECIPES = marked_blocks("ci.md", "recipe")


def test_every_recipe_is_found():
    assert set(RECIPES) == {"github-action", "github-commands", "github-pr-comment", "gitlab-policy", "gitlab", "diff"}


# -- the site --


def test_site_builds_strictly(tmp_path):
    # Not -q: mkdocs counts warnings for --strict through its log handler, which -q silences.
    result = subprocess.run(["mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    pages = sorted(p.relative_to(REPO / "docs").with_suffix(".html") for p in (REPO / "docs").rglob("*.md"))
    assert [p for p in pages if not (tmp_path / "site" / p).is_file()] == []


# -- GitHub Actions recipes --


def run_workflow(tmp_path: Path, recipe: str, libtorch_zip: Path, context: dict[str, str] | None = None) -> Job:
    """The recipe's one job, its steps in order; a cache hit restores what an earlier run fetched."""
    workflow = yaml.safe_load(RECIPES[recipe])
    (job_spec,) = workflow["jobs"].values()
    home = tmp_path / "home"
    home.mkdir()
    fetch_into(home, libtorch_zip, tmp_path / "earlier-run")
    workdir = tmp_path / "work"
    workdir.mkdir()
    shims = shim_bin(tmp_path)
    env = runner_env(tmp_path, home, shims, GITHUB_ACTIONS="true", CI="true",
                     GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    job = Job(workdir, env, context=dict(context or {}))
    used = []

    def uses(job: Job, step: dict) -> dict[str, str]:
        with_ = {k: job.substitute(v) for k, v in (step.get("with") or {}).items()}
        used.append((step["uses"], with_))
        if re.fullmatch(r"[A-Za-z0-9-]+/torch-doctor@v[0-9.]+", step["uses"]):
            return run_composite(ACTION, REPO, job, with_, uses)
        if step["uses"] == "actions/cache@v4":
            return {"cache-hit": "true"}
        assert re.fullmatch(r"actions/(checkout|setup-python|upload-artifact)@v\d+", step["uses"]), step["uses"]
        return {}

    steps = [dict(s, run=BUILD_CHECK) if s.get("name") == "Build" else s for s in job_spec["steps"]]
    job.run_steps(steps, uses)
    job.used = used  # type: ignore[attr-defined]
    return job


def ran(job: Job) -> list[str]:
    return [r.name for r in job.results if r.ran]


def assert_passed(job: Job) -> None:
    failed = [(r.name, r.returncode, r.stdout[-2000:], r.stderr[-2000:]) for r in job.results if r.returncode]
    assert not failed and not job.failed, failed


def test_recipe_github_action(tmp_path, libtorch_zip):
    job = run_workflow(tmp_path, "github-action", libtorch_zip)
    assert_passed(job)
    assert ran(job) == ["actions/checkout@v4", "actions/setup-python@v5", "Install torch-doctor", "Cache key for libtorch",
                        "Restore cached libtorch", "Environment for later steps", "Check libtorch", "Check libtorch", "Build"]
    build = next(r for r in job.results if r.name == "Build")
    assert build.stdout.strip() == f"build would use {tmp_path}/home/.cache/libtorch/2.13.0/linux-x86_64/cpu"
    assert not any(r.name == "Keep the report for doctor diff" and r.ran for r in job.results)
    report = json.loads(Path(job.steps["doctor"]["outputs"]["report"]).read_text())
    assert next(a for a in report["areas"] if a["name"] == "requirements")["summary"] == "2 of 2 met"

    # and the diff recipe, with that report as the CI machine's
    here = tmp_path / "here"
    here.mkdir()
    (here / "torch-doctor-report.json").write_text(json.dumps(report))
    result = subprocess.run(["bash", "-eo", "pipefail", "-c", RECIPES["diff"]], cwd=here, capture_output=True, text=True,
                            env=runner_env(tmp_path, tmp_path / "elsewhere", tmp_path / "shims"), timeout=60)
    # Same libtorch version, variant and ABI (the wheel's here, the fetched zip there): exit 0.
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[✓] libtorch (active): same (" in result.stdout
    assert "! LIBTORCH: none → " in result.stdout


def test_recipe_github_commands(tmp_path, libtorch_zip):
    job = run_workflow(tmp_path, "github-commands", libtorch_zip)
    assert_passed(job)
    assert (tmp_path / "shims/pip-installs").read_text().split() == ["torch-doctor"]
    key = job.steps["libtorch"]["outputs"]["key"]
    assert re.fullmatch(r"libtorch-2\.13\.0-cpu-cxx11-linux-x86_64-[0-9a-f]{8}", key)
    assert ("actions/cache@v4", {"path": "~/.cache/libtorch", "key": key}) in job.used
    names = [(r.name, r.ran) for r in job.results]
    assert ("Run doctor fetch-libtorch --version 2.13.0 --variant cpu", False) in names  # skipped: a cache hit
    check = next(r for r in job.results if r.name.startswith("Run doctor check"))
    assert check.returncode == 0 and "Requirements: 2 of 2 met" in check.stdout
    # GITHUB_ACTIONS=true and no --format: the github format (annotations, job summary)
    assert "::stop-commands::" in check.stdout
    assert "### ✅ torch-doctor check: passed" in (tmp_path / "summary.md").read_text()


def test_recipe_github_pr_comment(tmp_path, libtorch_zip):
    context = {"github.event_name": "pull_request", "github.token": "t0ken", "github.event.pull_request.number": "42"}
    job = run_workflow(tmp_path, "github-pr-comment", libtorch_zip, context)
    assert_passed(job)
    assert (tmp_path / "shims/gh-calls").read_text().strip() == "pr comment 42 --body-file doctor.md"
    body = (tmp_path / "shims/gh-body").read_text()
    assert re.match(r"### \S+ torch-doctor check: passed", body) and "| | Area | Status |" in body


# -- GitLab --


def test_recipe_gitlab(tmp_path, libtorch_zip):
    (job,) = yaml.safe_load(RECIPES["gitlab"]).values()
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "my-extension"\n\n' + RECIPES["gitlab-policy"])
    home = tmp_path / "home"
    home.mkdir()
    # the cache GitLab restores: .cache/libtorch under the project, as an earlier job fetched it
    fetch_into(home, libtorch_zip, tmp_path / "earlier-run", libtorch_home=project / ".cache/libtorch")
    lines = [BUILD_CHECK if line.startswith("cmake ") else line for line in job["script"]]
    exports = [f'export {name}="{value}"' for name, value in job["variables"].items()]
    script = "\n".join(exports + lines)  # GitLab expands variables the way the shell does here
    shims = shim_bin(tmp_path)
    env = runner_env(tmp_path, home, shims, CI="true", GITLAB_CI="true", CI_PROJECT_DIR=str(project))
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=project, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "is already installed (checked against its install record); nothing to do" in result.stdout + result.stderr
    assert "[✓] Requirements: 2 of 2 met" in result.stdout
    assert result.stdout.strip().endswith(f"build would use {project}/.cache/libtorch/2.13.0/linux-x86_64/cpu")

    junit = project / job["artifacts"]["reports"]["junit"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "0" and int(suite.get("tests")) >= 6
    assert any(c.get("classname") == "doctor.check.requirements" for c in suite.iter("testcase"))
    assert job["artifacts"]["when"] == "always"


def test_recipe_gitlab_junit_carries_a_failure(tmp_path, libtorch_zip):
    """The same job against a policy this tree does not meet: the job fails, the JUnit says why."""
    (job,) = yaml.safe_load(RECIPES["gitlab"]).values()
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(RECIPES["gitlab-policy"].replace("abi=cxx11", "abi=pre-cxx11"))
    home = tmp_path / "home"
    home.mkdir()
    fetch_into(home, libtorch_zip, tmp_path / "earlier-run", libtorch_home=project / ".cache/libtorch")
    exports = [f'export {name}="{value}"' for name, value in job["variables"].items()]
    script = "\n".join(exports + [line for line in job["script"] if not line.startswith("cmake ")])
    env = runner_env(tmp_path, home, shim_bin(tmp_path), CI="true", CI_PROJECT_DIR=str(project))
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=project, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "✗ requirement not met: abi=pre-cxx11 [requirement.unmet]" in result.stdout
    failures = ET.parse(project / "doctor-junit.xml").getroot().findall(".//failure")
    assert [f.get("type") for f in failures] == ["requirement.unmet"]
    assert "fix: doctor fetch-libtorch --version 2.6.0 --abi pre-cxx11" in failures[0].text


# -- policy examples --

EXAMPLES = list(re.finditer(r"<!-- example: (valid|invalid)([^>]*?) -->\n```toml\n(.*?)```",
                            (REPO / "docs/policy.md").read_text(), re.S))


def test_policy_examples_are_found():
    assert [m.group(1) for m in EXAMPLES] == ["valid", "valid", "invalid"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda m: m.group(1) + m.group(2))
def test_policy_examples(tmp_path, example):
    kind, where, text = example.group(1), example.group(2).strip(), example.group(3)
    project = tmp_path / "project"
    project.mkdir()
    (project / (where or "pyproject.toml")).write_text(text)
    result = run_doctor(["check", "--json"], cwd=project, env=doctor_env(tmp_path))
    if kind == "valid":
        assert result.returncode in (0, 1), result.stderr
        policy = json.loads(result.stdout)["policy"]
        assert policy["source"].startswith(str(project / (where or "pyproject.toml")))
    else:
        assert result.returncode == 2
        page = (REPO / "docs/policy.md").read_text()
        shown = re.search(r"```text\n(error: .*?)\n(hint: .*?)\n```", page).groups()
        actual = [line.replace(str(project), "/work/project") for line in result.stderr.splitlines()]
        assert actual == list(shown)
