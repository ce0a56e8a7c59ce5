"""Fixtures: a fake machine over a temporary root (testsupport.gpu_fakes)."""

from testsupport.gpu_fakes import machine  # noqa: F401  (pytest fixture)
