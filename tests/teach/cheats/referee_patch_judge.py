"""Patch ``ioattn.teach.judge.judge_outputs`` (and the name the assignments imported) to pass
everything with zero I/O, then do no work. Kind: reaching the referee from the student's process.
"""
import importlib

import ioattn.teach.judge as judge
from ioattn.memory import IOCount

base = importlib.import_module("ioattn.teach.assignments.base")


def _pass(run, expected, *, where=""):
    return IOCount(reads=0, writes=0, peak=0)


judge.judge_outputs = base.judge_outputs = _pass


def tiled_matmul(mem, A, B, C):
    return None
