"""The result contract (docs/json-schema.md): every command's machine output is one JSON envelope,
in success and in failure, valid against the JSON Schema the docs publish; errors keep their exit
codes and speak with one voice (`error:` / `hint:` on stderr, never click's "Usage: … Error:").

Each case runs the real CLI in a subprocess, as a CI job does (pipx's result-contract test is the
model: run each command, parse stdout as one document, validate it).
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import jsonschema
import pytest
from testsupport.support import REPO, doctor_subprocess

LOG = REPO / "tests/fixtures/logs/abi.mismatch--local-gxx-abi0.log"


def published_schema() -> dict:
    """The schema block of docs/json-schema.md (```json envelope-schema … ```): the test reads
    what users read, so the two cannot drift apart."""
    text = (REPO / "docs/json-schema.md").read_text(encoding="utf-8")
    match = re.search(r"```json envelope-schema\n(.*?)\n```", text, re.S)
    assert match, "docs/json-schema.md lost its envelope-schema block"
    schema = json.loads(match.group(1))
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


SCHEMA = published_schema()


def envelope(args: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[dict, object]:
    r = doctor_subprocess(*args, env=env, cwd=cwd)
    assert "Traceback" not in r.stderr or r.returncode == 3, r.stderr
    try:
        data = json.loads(r.stdout)  # the whole of stdout is one document
    except ValueError:
        pytest.fail(f"`doctor {' '.join(args)}` printed no single JSON document (exit {r.returncode}):\n"
                    f"stdout: {r.stdout[:2000]}\nstderr: {r.stderr[:2000]}")
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert data["exit_code"] == r.returncode, (data, r.stderr)
    assert data["command"] == args[0]
    if "error" in data and r.returncode != 3:  # stderr says the same, in the one voice (a crash: the traceback)
        assert f"error: {data['error']['message']}\n" in r.stderr, r.stderr
        assert "Usage:" not in r.stderr and "Error:" not in r.stderr
    return data, r


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    """One real `doctor check --json` report, and an error envelope from a failed check."""
    folder = tmp_path_factory.mktemp("reports")
    data, r = envelope(["check", "--json"])
    (folder / "a.json").write_text(r.stdout)
    _, bad = envelope(["check", "--json"], env={"DOCTOR_CUDA_DRIVER_VERSION": "abc"})
    (folder / "error.json").write_text(bad.stdout)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# (args, env, expected exit code, expected error id or None for a result)
CASES = {
    "check": (["check", "--json"], {}, None, None),
    "check-format-json": (["check", "--format", "json"], {}, None, None),
    "check-bad-env": (["check", "--json"], {"DOCTOR_CUDA_DRIVER_VERSION": "abc"}, 1, "env.bad-value"),
    "check-bad-option": (["check", "--json", "--bogus"], {}, 2, "usage.bad-option"),
    "check-bad-value": (["check", "--format=json", "--build", "nope"], {}, 2, "usage.bad-value"),
    "check-conflict": (["check", "--json", "--format", "text"], {}, 2, "usage.conflicting-options"),
    "check-crash": (["check", "--json"], {"DOCTOR_DEBUG_CRASH": "1"}, 3, "internal.crash"),
    "fetch-dry-run": (["fetch-libtorch", "--dry-run", "--json", "--version", "2.13.0", "--variant", "cpu",
                       "--platform", "linux-x86_64", "--no-lock"], {}, 0, None),
    "fetch-not-in-catalog": (["fetch-libtorch", "--dry-run", "--json", "--version", "0.0.1", "--variant", "cpu"], {},
                             2, "usage.not-in-catalog"),
    "fetch-not-http": (["fetch-libtorch", "--json", "--url", "ftp://example.invalid/x.zip", "--version", "2.13.0",
                        "--variant", "cpu", "--no-lock"], {}, 2, "usage.bad-input"),
    "cache-key": (["cache-key", "--json", "--version", "2.13.0", "--variant", "cpu", "--platform", "linux-x86_64"],
                  {}, 0, None),
    "cache-key-bad-abi": (["cache-key", "--json", "--abi", "both"], {}, 2, "usage.bad-value"),
    "explain": (["explain", "--json", "--no-facts", str(LOG)], {}, 1, None),
    "explain-command-ok": (["explain", "--json", "--from-command", "--", "echo", "--json"], {}, 0, None),
    "explain-command-failed": (["explain", "--json", "--no-facts", "--from-command", "--", "sh", "-c", "exit 7"], {},
                               7, None),
    "explain-missing-log": (["explain", "--json", "/nonexistent/build.log"], {}, 1, "explain.no-such-log"),
    "smoke-bad-steps": (["smoke", "--json", "--steps", "1"], {}, 2, "usage.bad-value"),
    "bench-bad-device": (["bench", "--json", "--device", "tpu"], {}, 2, "usage.bad-value"),
    "fleet-no-launcher": (["fleet", "--json"], {}, 2, None),
    "emit-has-no-json": (["emit", "setenv", "--json"], {}, 2, "usage.bad-option"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_command_prints_one_envelope(name):
    args, env, code, error_id = CASES[name]
    data, r = envelope(args, env=env)
    if code is not None:
        assert r.returncode == code, (r.stdout, r.stderr)
    if error_id is not None:
        assert data["error"]["id"] == error_id, data
    if "error" not in data:
        assert data["ok"] is (r.returncode == 0)


def test_a_fetch_that_fails_gives_an_error_envelope(tmp_path):
    """A real download failure (nothing listens on the port): exit 1, a fetch.* id, no tree."""
    url = f"http://127.0.0.1:{free_port()}/libtorch.zip"
    data, r = envelope(["fetch-libtorch", "--json", "-q", "--url", url, "--allow-http", "--version", "2.13.0",
                        "--variant", "cpu", "--no-lock", "--retries", "0", "--dest", str(tmp_path / "dest")])
    assert r.returncode == 1 and data["ok"] is False and data["error"]["id"] == "fetch.download-failed", data
    assert not (tmp_path / "dest").exists()


def test_fleet_without_a_launcher_names_the_launchers():
    data, _ = envelope(["fleet", "--json"])
    assert "torchrun" in data["error"]["hint"]


def test_crash_envelope_names_the_crash_report():
    data, r = envelope(["check", "--json"], env={"DOCTOR_DEBUG_CRASH": "1"})
    report = re.search(r"crash report: (\S+)", r.stderr).group(1)
    assert report in data["error"]["hint"] and Path(report).is_file()


def test_diff_success_and_failure(reports):
    a = str(reports / "a.json")
    data, r = envelope(["diff", "--json", a, a])
    assert r.returncode == 0 and data["ok"] is True and data["facts"]["differences"] == []
    data, r = envelope(["diff", "--json", a, str(reports / "missing.json")])
    assert r.returncode == 2 and data["error"]["id"] == "usage.bad-input"
    # an error envelope is not a report: said so, by its id and message
    data, r = envelope(["diff", "--json", a, str(reports / "error.json")])
    assert data["error"]["id"] == "usage.not-a-report" and "env.bad-value" in data["error"]["message"]


def test_an_undecodable_path_is_written_as_valid_unicode(tmp_path):
    """A folder named with the byte 0xff (Python holds it as a lone surrogate): the report carries
    it as the text \\xff, as the text report shows it, never as the escape "\\udcff" that strict
    readers (serde_json, `doctor diff`) refuse. diff takes what check wrote."""
    import os

    from doctor.bounded import lone_surrogate

    root = tmp_path / os.fsdecode(b"lib\xfftorch")
    root.mkdir()
    data, r = envelope(["check", "--json"], env={"LIBTORCH": str(root)})
    assert "\\ud" not in r.stdout and lone_surrogate(data) is None
    assert str(tmp_path / "lib\\xfftorch") in [c["root"] for c in data["facts"]["libtorch"]["candidates"]]
    report = tmp_path / "a.json"
    report.write_text(r.stdout, encoding="utf-8")
    data, r = envelope(["diff", "--json", str(report), str(report)])
    assert r.returncode == 0 and data["facts"]["differences"] == []


def test_smoke_and_bench_results_are_reports():
    data, _ = envelope(["smoke", "--json", "--device", "cpu", "--steps", "5"])
    assert data["command"] == "smoke" and data["areas"]
    data, r = envelope(["bench", "--json", "--device", "cpu", "--quick", "--no-compile"])
    assert data["command"] == "bench" and data["ok"] is (r.returncode == 0)


def test_fleet_result_is_a_report():
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    data, r = envelope(["fleet", "--json", "--timeout", "30", "--max-size", "1024", "--iters", "1"], env=env)
    assert r.returncode == 0 and data["ok"] is True and data["areas"], data.get("error")


def test_the_schema_refuses_what_breaks_the_contract():
    """The published schema is not vacuous: each broken envelope is refused."""
    good = {"schema": "torch-doctor/report", "schema_version": 2, "command": "cache-key", "doctor_version": "0.1.0",
            "ok": True, "exit_code": 0, "key": "k", "version": "2.13.0", "variant": "cpu", "abi": "cxx11",
            "platform": "linux-x86_64", "source": "url", "file_name": "f.zip", "salt": "", "key_format": 1}
    jsonschema.validate(good, SCHEMA)
    error = {**{k: good[k] for k in ("schema", "schema_version", "command", "doctor_version")}, "ok": False,
             "exit_code": 2, "error": {"id": "usage.bad-option", "message": "m", "hint": ""}}
    jsonschema.validate(error, SCHEMA)
    broken = [
        {**good, "ok": False},  # ok disagrees with exit_code 0
        {**good, "exit_code": 1},  # ... and with a failure
        {k: v for k, v in good.items() if k != "key"},  # the result lost a key
        {k: v for k, v in good.items() if k != "ok"},
        {**error, "exit_code": 0, "ok": True},  # an error that exits 0
        {**error, "error": {"id": "Bad Id", "message": "m", "hint": ""}},
        {**error, "error": {"id": "x", "message": "m"}},  # no hint key
        {**error, "key": "k"},  # a result and an error at once
        {**good, "command": "nonsense"},
        {**good, "schema_version": 1},
    ]
    for data in broken:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, SCHEMA)


# -- one error voice --


@pytest.mark.parametrize("args", [["check", "--bogus"], ["nosuch"], ["fetch-libtorch", "--abi", "x"],
                                  ["explain", "a.log", "b.log"], ["diff", "only-one.json"],
                                  ["diff", "-", "-"]])
def test_usage_errors_speak_one_voice(args):
    r = doctor_subprocess(*args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), r.stderr
    assert "Usage:" not in r.stderr and "Error:" not in r.stderr and r.stdout == ""


def test_help_still_works():
    r = doctor_subprocess("check", "--help")
    assert r.returncode == 0 and r.stdout.startswith("Usage: doctor check") and r.stderr == ""
    r = doctor_subprocess("--help")
    assert r.returncode == 0 and "fetch-libtorch" in r.stdout


def _package_error_ids() -> tuple[set[str], list[str]]:
    """The error ids the package names (the literal `error_id=` of each DoctorError it builds, and
    each error class's `default_id`), and every DoctorError built without one (`file:line`)."""
    import ast

    ids: set[str] = set()
    unnamed: list[str] = []
    for path in sorted((REPO / "doctor").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "DoctorError":
                given = next((k.value for k in node.keywords if k.arg == "error_id"), None)
                if given is None and len(node.args) < 3:
                    unnamed.append(f"{path.relative_to(REPO)}:{node.lineno}")
                if isinstance(given, ast.Constant):
                    ids.add(given.value)
            elif isinstance(node, ast.keyword) and node.arg == "error_id" and isinstance(node.value, ast.Constant):
                ids.add(node.value.value)
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "default_id" for t in node.targets):
                ids.add(node.value.value)
    return ids, unnamed


def test_every_error_the_package_raises_has_a_documented_id():
    """A CI script tells failures apart by `error.id` (pip's DiagnosticPipError references): no error
    leaves the package as the generic `error`, and docs/json-schema.md lists every id."""
    ids, unnamed = _package_error_ids()
    assert unnamed == []
    documented = set(re.findall(r"`([a-z]+(?:\.[a-z0-9-]+)?)`", (REPO / "docs/json-schema.md").read_text(encoding="utf-8")))
    assert len(ids) > 40 and ids - {"error"} - documented == set()


@pytest.mark.parametrize("args, env, error_id", [
    (["check", "--json"], {"DOCTOR_PROBE_TIMEOUT": "soon"}, "env.bad-value"),
    (["fetch-libtorch", "--json", "--version", "2.5.1", "--variant", "cpu", "--dest", "{tmp}/link"], {}, "fetch.unsafe-dest"),
])
def test_errors_name_their_id_in_the_envelope(tmp_path, args, env, error_id):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    data, r = envelope([a.replace("{tmp}", str(tmp_path)) for a in args], env={**env, "LIBTORCH_HOME": str(tmp_path)})
    assert r.returncode == 1 and data["error"]["id"] == error_id and not data["ok"]
