"""The files here are notebooks' code cells, graded by ``tests/teach/test_cheats.py``: not tests."""

collect_ignore_glob = ["*.py"]
