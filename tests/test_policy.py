"""The policy file: parsing and validation on a test Host, its effect on a report, and — through
the real `python -m doctor check` in a subprocess — on exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testsupport.ci_support import ERROR, WARNING, doctor_env, run_doctor, sample_report

from doctor.errors import UsageError
from doctor.host import Host
from doctor.model import Level
from doctor.check import load_policy
from doctor.policy import Policy, apply_policy

PYPROJECT = """\
[project]
name = "my-extension"

[tool.doctor]
min-version = "0.1"
require = ["libtorch>=2.5,<2.14", "abi=cxx11"]
error-on = ["cxx.std-too-old"]
ignore = { "abi.mismatch" = "only the Python extension is built in this job" }
"""


def host_with(tmp_path: Path, files: dict[str, str]) -> Host:
    for name, text in files.items():
        path = tmp_path / "work" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return Host.for_test(tmp_path)  # cwd is /work under the root


def load(tmp_path: Path, files: dict[str, str], version: str = "0.1.0") -> Policy | None:
    return load_policy(host_with(tmp_path, files), doctor_version=version)


def test_pyproject_policy(tmp_path):
    policy = load(tmp_path, {"pyproject.toml": PYPROJECT})
    assert policy == Policy(
        source="/work/pyproject.toml [tool.doctor]",
        requirements=("libtorch>=2.5,<2.14", "abi=cxx11"),
        error_on=frozenset({"cxx.std-too-old"}),
        ignore={"abi.mismatch": "only the Python extension is built in this job"},
        min_version="0.1",
    )


def test_doctor_toml_uses_top_level_keys(tmp_path):
    policy = load(tmp_path, {"doctor.toml": 'require = ["variant=cpu"]\n', "pyproject.toml": '[project]\nname = "x"\n'})
    assert policy.source == "/work/doctor.toml" and policy.requirements == ("variant=cpu",)


def test_no_policy(tmp_path):
    assert load(tmp_path, {}) is None
    assert load(tmp_path, {"pyproject.toml": '[tool.black]\nline-length = 100\n'}) is None


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"doctor.toml": 'requires = ["libtorch>=2"]\n'}, "/work/doctor.toml: requires: unknown key"),
        ({"doctor.toml": 'require = "libtorch>=2"\n'}, "/work/doctor.toml: require: must be a list"),
        ({"doctor.toml": 'require = ["libtorch=>2"]\n'}, "/work/doctor.toml: require: malformed requirement 'libtorch=>2'"),
        ({"doctor.toml": 'require = ["abi=cxx12"]\n'}, "/work/doctor.toml: require: malformed requirement 'abi=cxx12'"),
        ({"doctor.toml": 'error-on = ["ABI mismatch"]\n'}, "error-on: 'ABI mismatch' is not a finding id"),
        ({"doctor.toml": 'error-on = "abi.mismatch"\n'}, "error-on: must be a list"),
        ({"doctor.toml": '[ignore]\n"abi.mismatch" = ""\n'}, "/work/doctor.toml: ignore.abi.mismatch: needs a reason"),
        ({"doctor.toml": '[ignore]\n"abi.mismatch" = true\n'}, "ignore.abi.mismatch: needs a reason"),
        ({"doctor.toml": 'ignore = ["abi.mismatch"]\n'}, "ignore: must be a table"),
        ({"doctor.toml": 'error-on = ["abi.mismatch"]\n[ignore]\n"abi.mismatch" = "x"\n'}, "'abi.mismatch' is also in error-on"),
        ({"doctor.toml": 'min-version = 0.1\n'}, "min-version: must be a version string"),
        ({"doctor.toml": 'min-version = "soon"\n'}, "min-version: 'soon' is not a version"),
        ({"doctor.toml": 'require = [\n'}, "/work/doctor.toml: not valid TOML"),
        ({"pyproject.toml": '[tool]\ndoctor = 3\n'}, "[tool.doctor] must be a table"),
        ({"doctor.toml": "", "pyproject.toml": "[tool.doctor]\n"}, "two doctor policies: /work/doctor.toml and /work/pyproject.toml"),
    ],
)
def test_bad_policies_are_usage_errors(tmp_path, files, message):
    with pytest.raises(UsageError) as info:
        load(tmp_path, files)
    assert message in info.value.message
    assert info.value.exit_code == 2


def test_min_version_is_checked_before_unknown_keys(tmp_path):
    files = {"doctor.toml": 'min-version = "0.3"\nnew-key-from-0-3 = true\n'}
    with pytest.raises(UsageError) as info:
        load(tmp_path, files, version="0.1.0")
    assert "needs torch-doctor >= 0.3, this is 0.1.0" in info.value.message
    assert "pip install -U 'torch-doctor>=0.3'" == info.value.hint
    assert load(tmp_path / "ok", {"doctor.toml": 'min-version = "0.1"\n'}, version="0.1.0") is not None


def test_apply_policy_ignores_and_escalates():
    policy = Policy(source="doctor.toml", error_on=frozenset({WARNING.id}), ignore={ERROR.id: "not our build"})
    before = sample_report()
    assert before.exit_code() == 1
    after = apply_policy(before, policy)
    levels = {f.id: f.level for f in after.findings}
    assert levels == {ERROR.id: Level.INFO, "libtorch.found": Level.INFO, WARNING.id: Level.ERROR}
    ignored = next(f for f in after.findings if f.id == ERROR.id)
    assert ignored.detail.endswith("ignored by doctor.toml: not our build (was error)")
    assert after.extra["policy"] == {"source": "doctor.toml", "ignored": {ERROR.id: "not our build"}, "escalated": [WARNING.id]}
    assert after.exit_code() == 1  # the escalated warning fails now
    # the input report is left as it was
    assert {f.id: f.level for f in before.findings}[ERROR.id] is Level.ERROR
    only_ignore = apply_policy(before, Policy(source="doctor.toml", ignore={ERROR.id: "not our build"}))
    assert only_ignore.exit_code() == 0
    assert apply_policy(before, None) is before


# -- through the real CLI: needs `doctor check` reading the policy --


def check(tmp_path: Path, *args: str, **env: str):
    return run_doctor(["check", "--json", *args], cwd=tmp_path / "project", env=doctor_env(tmp_path, **env))


@pytest.fixture
def project(tmp_path):
    (tmp_path / "project").mkdir()
    (tmp_path / "home").mkdir()
    return tmp_path / "project"


def test_policy_ignore_turns_a_failure_into_a_pass(tmp_path, project):
    failing = check(tmp_path, LIBTORCH="/nonexistent/libtorch")
    assert failing.returncode == 1, failing.stderr
    errors = sorted({f["id"] for f in json.loads(failing.stdout)["findings"] if f["level"] == "error"})
    assert errors
    table = "".join(f'"{fid}" = "CI builds only the Python package; libtorch is not used"\n' for fid in errors)
    (project / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.doctor.ignore]\n{table}', encoding="utf-8")
    passing = check(tmp_path, LIBTORCH="/nonexistent/libtorch")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    report = json.loads(passing.stdout)
    assert sorted(report["policy"]["ignored"]) == errors
    for f in report["findings"]:
        if f["id"] in errors:
            assert f["level"] == "info" and "CI builds only the Python package" in f["detail"]


def test_policy_requirement_fails_the_check(tmp_path, project):
    (project / "doctor.toml").write_text('require = ["libtorch>=99"]\n', encoding="utf-8")
    result = check(tmp_path)
    assert result.returncode == 1, result.stderr
    unmet = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "requirement.unmet"]
    assert [f["subject"] for f in unmet] == ["libtorch>=99"]


@pytest.mark.parametrize("requirement", ["abi=pre-cxx11", "variant=cu128", "variant=rocm6.4", "libtorch>=2.5,<2.10"])
def test_an_unmet_requirements_fix_works_when_pasted(tmp_path, project, requirement):
    """The fix names a version that was published with what is asked: `--abi pre-cxx11` alone
    asked for 2.13.0 (CXX11 only) and `--variant cu128` for a release without cu128, both
    refused by fetch-libtorch. Pasted here as --dry-run, it is accepted."""
    (unmet,) = [f for f in json.loads(check(tmp_path, "--require", requirement).stdout)["findings"]
                if f["id"] == "requirement.unmet"]
    words = unmet["fix"].split("  (")[0].split()
    assert words[:2] == ["doctor", "fetch-libtorch"] and "--version" in words, unmet["fix"]
    pasted = run_doctor([*words[1:], "--dry-run", "--no-lock"], cwd=project, env=doctor_env(tmp_path))
    assert pasted.returncode == 0, pasted.stderr


def test_a_torch_requirement_with_a_local_label_is_fixed_from_that_labels_index(tmp_path, project):
    (unmet,) = [f for f in json.loads(check(tmp_path, "--require", "torch==2.13.0+cu128").stdout)["findings"]
                if f["id"] == "requirement.unmet"]
    assert unmet["fix"] == "pip install 'torch==2.13.0+cu128' --index-url https://download.pytorch.org/whl/cu128"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[tool.doctor]\nignore-all = true\n', "pyproject.toml [tool.doctor]: ignore-all: unknown key"),
        ('[tool.doctor.ignore]\n"abi.mismatch" = ""\n', "ignore.abi.mismatch: needs a reason"),
        ('[tool.doctor.ignore]\n"requirement.unmet" = "x"\n', "ignore.requirement.unmet: a requirement cannot be ignored"),
    ],
)
def test_bad_policy_exits_2_naming_key_and_file(tmp_path, project, text, needle):
    (project / "pyproject.toml").write_text(text, encoding="utf-8")
    result = check(tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert needle in result.stderr and str(project / "pyproject.toml") in result.stderr


def test_known_finding_ids_are_the_documented_ones():
    """error-on/ignore accept exactly the ids that have a docs/findings page: a new finding needs
    both, and a typo is refused (exit 2) rather than silently doing nothing."""
    from doctor.policy import FINDING_IDS

    docs = Path(__file__).resolve().parents[1] / "docs/findings"
    assert FINDING_IDS == {p.stem for p in docs.glob("*.md") if p.stem != "index"}
