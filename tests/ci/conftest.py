"""Fixtures for the CI tests; the helpers live in ci_support (an importable, unique name)."""

from ci_support import libtorch_zip, old_abi_tree, report  # noqa: F401  (pytest fixtures)
