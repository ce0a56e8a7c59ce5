"""Data tables, each row tested: releases × variants × platforms (releases.py); CUDA driver
floors and GPU architectures per build (cuda.py). Overridable from the command line."""
