"""Every ```python block of docs/torchfn.md runs as written, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(name: str) -> list[str]:
    return BLOCK.findall((REPO / "docs" / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", ["torchfn.md", "torchfn-for-nn-module-users.md"])
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    blocks = _blocks(page)
    assert len(blocks) >= 4, f"{page}: found only {len(blocks)} python blocks"
    monkeypatch.chdir(tmp_path)  # snippets that save files write here
    namespace: dict = {"__name__": "docs"}
    for i, code in enumerate(blocks, 1):
        try:
            exec(compile(code, f"{page} block {i}", "exec"), namespace)
        except Exception as exc:  # name the block: the traceback's filename says it too
            raise AssertionError(f"{page}: python block {i} failed: {exc!r}\n{code}") from exc
