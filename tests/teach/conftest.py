"""The teach tests grade with a grading key of their own: fixed, so that every grading is
repeatable, and never the key of the machine's user."""

from __future__ import annotations

import os

import pytest

from ioattn.teach.variants import KEY_ENV

#: The tests' grading key (a key only repeats gradings: this one is public, a course's is not).
TEST_KEY = "0123456789abcdef" * 4


@pytest.fixture(autouse=True, scope="session")
def _grading_key(tmp_path_factory):
    path = tmp_path_factory.mktemp("key") / "grading.key"
    path.write_text(TEST_KEY + "\n")
    path.chmod(0o600)
    before = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = str(path)
    yield path
    if before is None:
        os.environ.pop(KEY_ENV, None)
    else:
        os.environ[KEY_ENV] = before
