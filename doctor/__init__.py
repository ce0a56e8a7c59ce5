"""torch-doctor: find, explain and fix libtorch setups."""

__version__ = "0.1.0"
