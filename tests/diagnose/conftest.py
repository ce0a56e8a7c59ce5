"""Fixtures for the diagnose tests: fake machines and toolkits, an old-ABI libtorch tree."""

from testsupport.ci_support import old_abi_tree  # noqa: F401  (pytest fixtures)
from testsupport.cuda_fakes import fake_root  # noqa: F401
from testsupport.gpu_fakes import machine  # noqa: F401
