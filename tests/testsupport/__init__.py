"""Helpers the tests import (`from testsupport.support import make_tree`): tests/ is on pytest's
pythonpath (pyproject.toml), so this package imports the same under `pytest` and
`python -m pytest`. Fixtures defined here are made available to a folder by its conftest.py."""
