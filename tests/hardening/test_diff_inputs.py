"""`doctor diff` reads files from another machine: malformed, deeply nested, huge or odd input
is exit 2 with an error and a hint, never a crash (exit 3) or a hang."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testsupport.support import doctor_subprocess

from doctor.cli import main

MINIMAL = {"schema": "torch-doctor/report", "schema_version": 1, "command": "check", "facts": {}}


def _diff(tmp_path, a_bytes: bytes, b: dict | None = None):
    a = tmp_path / "a.json"
    a.write_bytes(a_bytes)
    bfile = tmp_path / "b.json"
    bfile.write_text(json.dumps(b or MINIMAL))
    return doctor_subprocess("diff", str(a), str(bfile))


def _assert_usage_error(result, *words: str):
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: ") and any(l.startswith("hint: ") for l in lines), result.stderr
    for word in words:
        assert word in result.stderr
    assert "Traceback" not in result.stderr


def test_diff_malformed_json(tmp_path):
    _assert_usage_error(_diff(tmp_path, b'{"schema": "torch-doctor/report", '), "not JSON")


def test_diff_deeply_nested(tmp_path):
    deep = b'{"schema": "torch-doctor/report", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    _assert_usage_error(_diff(tmp_path, deep), "nested deeper than 64")


def test_diff_lone_surrogate(tmp_path):
    data = dict(MINIMAL, facts={"env": {"LIBTORCH": "\\ud800"}})
    text = json.dumps(data).replace("\\\\ud800", "\\ud800").encode()
    assert b"\\ud800" in text
    _assert_usage_error(_diff(tmp_path, text), "lone surrogate", "facts.env.LIBTORCH")


def test_diff_number_with_thousands_of_digits(tmp_path):
    text = json.dumps(dict(MINIMAL, schema_version=1)).replace('"schema_version": 1', '"schema_version": ' + "9" * 5000)
    _assert_usage_error(_diff(tmp_path, text.encode()), "not JSON")


def test_diff_not_utf8(tmp_path):
    _assert_usage_error(_diff(tmp_path, b'{"schema": "\xff\xfe"}'), "not UTF-8")


def test_diff_device_is_refused_not_read_forever(tmp_path):
    b = tmp_path / "b.json"
    b.write_text(json.dumps(MINIMAL))
    result = doctor_subprocess("diff", "/dev/zero", str(b))
    _assert_usage_error(result, "not a regular file")


def test_diff_oversized_input(tmp_path):
    big = b'{"schema": "torch-doctor/report", "pad": "' + b"x" * (17 << 20) + b'"}'
    _assert_usage_error(_diff(tmp_path, big), "larger than 16 MiB")


@pytest.mark.parametrize("facts", [
    {"libtorch": 5}, {"libtorch": {"active": 0, "candidates": "x"}}, {"gpu": []}, {"toolchain": {"compilers": [1]}},
    {"env": []}, {"python_torch": "2.13"}, {"system": None, "loader": [1, 2]},
])
def test_diff_facts_of_another_shape(tmp_path, facts):
    result = _diff(tmp_path, json.dumps(dict(MINIMAL, facts=facts, findings=7)).encode())
    assert result.returncode in (0, 1, 2), result.stderr
    assert "Traceback" not in result.stderr


def test_diff_two_stdin_is_usage(tmp_path):
    result = doctor_subprocess("diff", "-", "-")
    assert result.returncode == 2 and "only one of A and B" in result.stderr


# -- fuzzing: any JSON-ish report is exit 0, 1 or 2 in process, never an exception --

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
FACT_KEYS = ["libtorch", "python_torch", "gpu", "toolchain", "loader", "system", "env"]
facts_strategy = st.dictionaries(st.sampled_from(FACT_KEYS), json_values, max_size=7)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(facts_a=facts_strategy, facts_b=facts_strategy, findings=json_values)
def test_diff_fuzz_reports_never_crash(tmp_path, facts_a, facts_b, findings):
    a, b = tmp_path / "fa.json", tmp_path / "fb.json"
    a.write_text(json.dumps(dict(MINIMAL, facts=facts_a, findings=findings)))
    b.write_text(json.dumps(dict(MINIMAL, facts=facts_b)))
    rc = main(["diff", "--json", str(a), str(b)])
    assert rc in (0, 1, 2)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_diff_fuzz_bytes_never_crash(tmp_path, raw):
    a, b = tmp_path / "ra.json", tmp_path / "rb.json"
    a.write_bytes(raw)
    b.write_text(json.dumps(MINIMAL))
    assert main(["diff", str(a), str(b)]) in (0, 1, 2)
