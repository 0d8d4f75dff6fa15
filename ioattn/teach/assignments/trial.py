"""One run of a submission's function through a fresh refereed memory."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..harness import Call, call
from ..judge import judge_run, need_callable
from ..memory import Referee

__all__ = ["Trial", "run_trial"]


@dataclass
class Trial:
    """The run: the call, its referee, the input and output handles, and what was passed."""

    call: Call
    referee: Referee
    inputs: dict
    outputs: dict

    def decoys(self) -> dict:
        """Name -> the decoy values behind each input handle."""
        return {k: self.referee.decoy(h) for k, h in self.inputs.items()}

    def judge(self, expected: dict, *, lower: int | None = None):
        """:func:`~ioattn.teach.judge.judge_run` with ``expected``: output name -> dict of
        ``expected`` (and optional ``decoy``, ``public``) arrays. Returns the recounted I/O."""
        outputs = [(self.outputs[k], want) for k, want in expected.items()]
        return judge_run(self.call, self.referee, outputs, lower=lower)


def run_trial(fn, name: str, M: int, inputs: dict, outputs: dict, *, seed: int,
              extra=()) -> Trial:
    """Call ``fn(mem, *input handles, *output handles, *extra)`` on a fresh refereed memory.

    ``inputs`` maps names to arrays (loaded into slow memory, in order); ``outputs`` maps names
    to shapes (NaN until written).
    """
    need_callable(fn, name)
    ref = Referee(M, owner=name, seed=seed)
    ins = {k: ref.load(k, np.asarray(v, dtype=np.float64)) for k, v in inputs.items()}
    outs = {k: ref.output(k, shape) for k, shape in outputs.items()}
    c = call(fn, (ref.memory, *ins.values(), *outs.values(), *extra), name=name, referee=ref)
    return Trial(c, ref, ins, outs)
