"""Shared fixtures of the pebbling tests."""

import itertools
import types

import pytest

from ioattn.pebble import compiled, search

#: The seconds the searches' clock moves at every reading under :func:`ticking_clock` (a power
#: of two, so that every time it tells is exact).
TICK = 2.0 ** -6


@pytest.fixture
def ticking_clock(monkeypatch):
    """The searches' clock (``time.perf_counter`` as ioattn.pebble.search and
    ioattn.pebble.compiled read it) replaced by one that moves :data:`TICK` seconds at every
    reading and not otherwise: how far a search gets within a time limit is then the same
    however fast or loaded the machine. The one-off compilation is done first, on the real
    clock."""
    if compiled.available():
        compiled.compile_seconds()
    ticks = itertools.count(1)
    clock = types.SimpleNamespace(perf_counter=lambda: next(ticks) * TICK)
    for module in (search, compiled):
        monkeypatch.setattr(module, "time", clock)
