"""Fixtures for the renderer tests: a sample report with every level."""

from testsupport.ci_support import report  # noqa: F401  (pytest fixture)
