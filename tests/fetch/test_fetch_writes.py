"""fetch-libtorch writes through the Host door: the destination, the lock file and the kept
archive are paths as the user sees them, mapped under the Host's root like every read."""

from __future__ import annotations

import json
from pathlib import Path

from testsupport.fetch_helpers import libtorch_zip

from doctor.fetch.pipeline import FetchOptions, fetch
from doctor.fetch.plan import FetchRequest, resolve_plan
from doctor.fetch.record import MARKER, RECORD
from doctor.host import Host


def test_lock_dest_and_record_land_under_the_host_root(tmp_path):
    root = tmp_path / "root"
    (root / "proj").mkdir(parents=True)
    libtorch_zip(root / "proj/libtorch.zip")
    host = Host.for_test(root, cwd=Path("/proj"))
    plan = resolve_plan(host, FetchRequest(version="2.13.0", variant="cpu", platform="linux-x86_64",
                                           archive="/proj/libtorch.zip", dest="/cache/lt", lock="/proj/libtorch.lock"))
    outcome = fetch(host, plan, FetchOptions(), lambda line: None)
    assert outcome.action == "installed" and outcome.lock == "recorded"
    lock = json.loads((root / "proj/libtorch.lock").read_text())  # mapped: not ./proj on the real disk
    assert list(lock["libtorch"]) == [plan.lock_key]
    assert (root / "cache/lt" / RECORD).is_file() and (root / "cache/lt" / MARKER).is_file()
    assert not (tmp_path / "proj").exists()
    # A second run reads the same mapped lock and finds the tree installed.
    again = fetch(host, plan, FetchOptions(), lambda line: None)
    assert again.action == "already-installed" and again.lock == "verified"
