"""Fuzzing the lock-file parser (hypothesis): whatever the bytes, reading a lock is either a
dict of well-formed entries or a DoctorError — never another exception (exit 3)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.errors import DoctorError
from doctor.fetch.lock import entry_problem, parse_lock, read_lock

KEY = "2.13.0/linux-x86_64/cpu/cxx11"
NAR = "sha256-" + "A" * 43 + "="

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=80),
                    st.just("0" * 64), st.just(NAR))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=12), inner, max_size=5)),
                           max_leaves=30)
entries = st.fixed_dictionaries({}, optional={"sha256": json_values, "nar_hash": json_values, "size": json_values,
                                             "url": json_values, "file": json_values, "source": json_values})
locks = st.fixed_dictionaries({}, optional={
    "lock_version": st.one_of(st.just(1), json_values),
    "libtorch": st.one_of(st.dictionaries(st.one_of(st.just(KEY), st.text(max_size=20)),
                                          st.one_of(entries, json_values), max_size=3), json_values)})


def _outcome(text: str):
    try:
        result = parse_lock(text)
    except DoctorError as exc:
        assert exc.message and exc.exit_code == 1
        return None
    assert isinstance(result, dict)
    for entry in result.values():
        assert entry_problem(entry) is None
    return result


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(locks)
def test_structured_locks(lock):
    _outcome(json.dumps(lock))


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_arbitrary_text(text):
    _outcome(text)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_arbitrary_bytes_from_a_file(tmp_path, raw):
    path = tmp_path / "libtorch.lock"
    path.write_bytes(raw)
    try:
        read_lock(path)
    except DoctorError as exc:
        assert exc.exit_code == 1


def test_well_formed_entry_is_accepted():
    assert _outcome(json.dumps({"lock_version": 1, "libtorch": {KEY: {"sha256": "0" * 64, "nar_hash": NAR}}})) == {
        KEY: {"sha256": "0" * 64, "nar_hash": NAR}}


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(json_values.map(lambda v: json.dumps(v).encode()), st.binary(max_size=200)))
def test_install_record_reader_never_raises(tmp_path, raw):
    from doctor.fetch.record import load_record, read_install_record

    (tmp_path / "torch-doctor.json").write_bytes(raw)
    assert read_install_record(tmp_path) is None  # nothing random is a well-formed record
    assert load_record(tmp_path) is None
