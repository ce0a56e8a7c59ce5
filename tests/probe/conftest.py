"""Fixtures for the probe tests: fake machines, fake libcuda builds, fake CUDA toolkits."""

from testsupport.cuda_fakes import fake_root  # noqa: F401  (pytest fixtures)
from testsupport.gpu_fakes import libcuda, machine  # noqa: F401
