"""The corpus of real logs: each `dev` log is classified exactly as its index says, root cause
first. The `holdout` part is scored, not pinned, by tests/explain/test_generalisation.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from doctor.explain import MachineFacts, explain_text
from doctor.host import Host

LOGS = Path(__file__).resolve().parents[2] / "tests/fixtures/logs"
INDEX = json.loads((LOGS / "index.json").read_text())["logs"]
DEV = [e for e in INDEX if e["split"] == "dev"]
PAIR = ("link.as-needed", "cuda.not-compiled")  # decided by the libtorch's variant (disambiguate.py)


def thread_facts(entry: dict) -> MachineFacts | None:
    """What the source thread says of the reporter's libtorch (index `facts`), as machine facts."""
    from doctor.probe.libtorch import LibtorchInstall

    known = entry.get("facts")
    if not known:
        return None
    return MachineFacts(install=LibtorchInstall(root="(the reporter's libtorch)", origins=["source thread"],
                                                include_dirs=[], lib_dir="", exists=False, complete=False,
                                                variant=known["libtorch_variant"]))
DIAGNOSES = [
    "headers.missing", "link.library-missing", "abi.mismatch", "loader.library-not-found", "glibc.too-old",
    "arch.mismatch", "version.mismatch", "cuda.driver-too-old", "cuda.arch-unsupported", "cuda.not-compiled",
    "link.as-needed", "cuda.no-device", "cxx.std-too-old", "macos.duplicate-rpath", "memory.oom",
]


def test_index_and_files_agree():
    assert {e["file"] for e in INDEX} == {p.name for p in LOGS.glob("*.log")}
    assert len({e["file"] for e in INDEX}) == len(INDEX)


def test_corpus_size_and_coverage():
    with_problem = [e for e in INDEX if e["ids"]]
    assert len(with_problem) >= 45
    public = Counter(i for e in INDEX if e["kind"] == "public" for i in e["ids"])
    thin = {i: public[i] for i in DIAGNOSES if public[i] < 3}
    assert not thin, f"fewer than 3 public logs for {thin}"
    clean = [e["file"] for e in INDEX if not e["ids"]]
    for kind in ("typeerror", "shape-mismatch", "cxx-syntax"):
        assert any(kind in name for name in clean), f"no no-problem log of kind {kind}"


@pytest.mark.parametrize("entry", DEV, ids=[e["file"] for e in DEV])
def test_each_log_yields_exactly_its_ids(entry):
    text = (LOGS / entry["file"]).read_bytes()
    assert [f.id for f in explain_text(text, thread_facts(entry), source=entry["file"])] == entry["ids"]


@pytest.fixture(scope="module")
def this_machine() -> MachineFacts:
    from doctor.explain_machine import detect

    return detect(Host.from_system())


def test_this_machines_facts_change_advice_never_the_diagnosis(this_machine):
    """Except between the look-alike pair, where the active libtorch's variant decides (here: CPU)."""
    assert this_machine.install is not None, "the torch wheel's libtorch should be the active one here"
    assert this_machine.install.variant == "cpu"
    for entry in DEV:
        text = (LOGS / entry["file"]).read_bytes()
        found = explain_text(text, this_machine, source=entry["file"])
        want = [("cuda.not-compiled" if i in PAIR else i) for i in entry["ids"]]
        assert [f.id for f in found] == want, entry["file"]
        for f in found:
            assert f.fix and f.title and f.detail.startswith(("line ", "explains")), (entry["file"], f)
            assert any(e.kind == "log" and e.source.startswith(entry["file"] + ":") for e in f.evidence)
