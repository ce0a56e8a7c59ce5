"""dist.version-mismatch: ranks that run different NCCL releases (issue 15).

The corpus logs are in tests/fixtures/logs (dist.version-mismatch--*.log); these are the
variants beyond them, the look-alike NCCL lines that are other problems, and the advice that
decodes NCCL's version codes."""

from __future__ import annotations

import pytest

from doctor import fixes
from doctor.explain import explain_text


@pytest.mark.parametrize("code,release", [("22705", "2.27.5"), ("22703", "2.27.3"), ("21903", "2.19.3"),
                                          ("2708", "2.7.8"), ("2406", "2.4.6"), (21003, "2.10.3")])
def test_nccl_version_codes_decode_as_nccl_h_encodes_them(code, release):
    # nccl.h: NCCL_VERSION(X,Y,Z) = X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9
    assert fixes.nccl_release(code) == release


MISMATCH = [
    # NCCL's own warning line under NCCL_DEBUG=WARN (init.cc, format of NCCL 2.19+)
    "node-b:4127:4190 [3] init.cc:631 NCCL WARN Mismatched NCCL version detected : rank 11 version 21805 rank 0 version 21903",
    # torch quoting NCCL's last error, behind a torchrun rank prefix
    "[rank3]: Last error:\n[rank3]: Mismatched NCCL version detected : rank 3 version 22005 rank 0 version 21903",
]


@pytest.mark.parametrize("text", MISMATCH)
def test_the_mismatch_warning_names_both_releases(text):
    [finding] = explain_text(text)
    assert finding.id == "dist.version-mismatch"
    assert " vs " in finding.title and "2.19.3" in finding.title
    assert "2.19.3" in finding.fix and "doctor fleet" in finding.fix


def test_the_advice_names_which_rank_runs_which_release():
    [finding] = explain_text(MISMATCH[0])
    assert "rank 11: NCCL 2.18.5, rank 0: NCCL 2.19.3" in finding.detail
    assert finding.subject == "2.18.5 vs 2.19.3"


def test_a_zero_peer_address_is_read_as_a_release_mismatch():
    line = "ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor AF_INET6(10)"
    [finding] = explain_text("ncclInternalError: Internal check failed.\nLast error:\n" + line)
    assert finding.id == "dist.version-mismatch" and "family 0" in finding.detail
    assert fixes.same_versions_on_every_node() == finding.fix


NOT_A_VERSION_MISMATCH = [
    # NVIDIA/nccl#2057: an AF_UNIX address on one node with P2P and SHM disabled (an NCCL bug)
    "misc/socket.cc:537 NCCL WARN ncclSocketInit: connecting to address  with family 1 is neither AF_INET(2) nor AF_INET6(10)",
    # aws/aws-ofi-nccl#715: a garbage family from the network plugin's handle
    "algo-1:17774:17862 [1] misc/socket.cc:717 NCCL WARN ncclSocketInit: connecting to address with family 33022 is "
    "neither AF_INET(2) nor AF_INET6(10)",
    # NVIDIA/nccl#296: ranks that called different collectives, not different releases
    "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 39. "
    "You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs",
]


@pytest.mark.parametrize("text", NOT_A_VERSION_MISMATCH)
def test_look_alike_nccl_lines_are_not_read_as_a_version_mismatch(text):
    assert [f.id for f in explain_text(text)] == []


def test_a_hostile_version_code_is_not_echoed_whole():
    huge = "9" * 3000
    [finding] = explain_text(f"Mismatched NCCL version detected : rank 1 version {huge} rank 0 version 22703")
    assert finding.id == "dist.version-mismatch" and huge not in finding.title + finding.detail + finding.fix
    assert "999999999999…" in finding.title and "2.27.3" in finding.title
