"""Fixtures for the CI tests; the helpers live in testsupport.ci_support."""

from testsupport.ci_support import libtorch_zip, old_abi_tree, report  # noqa: F401  (pytest fixtures)
