"""Run Otter Run on one prepared notebook, in a process of its own, and save the results as JSON.

``python -m ioattn.teach.worker NOTEBOOK AUTOGRADER RESULTS`` is what :func:`ioattn.teach.grade`
starts for each submission: otter-grader executes the notebook in a fresh kernel (no Docker),
runs every test of the autograder in it, and this module writes, for each question, its score,
its points and every test case's outcome. A separate process keeps a submission that crashes or
hangs from taking the grader with it.
"""

from __future__ import annotations

import json
import sys

__all__ = ["run"]


def run(notebook: str, autograder: str) -> dict:
    """Grade ``notebook`` with the otter ``autograder`` zip; the results as plain data."""
    from otter.api import grade_submission

    results = grade_submission(notebook, autograder, quiet=True)
    out = {}
    for name, tf in results.results.items():
        out[name] = {
            "score": float(tf.score),
            "possible": float(tf.possible),
            "cases": [{"hidden": bool(r.test_case.hidden), "passed": bool(r.passed),
                       "message": str(r.message)} for r in tf.test_case_results],
        }
    error = results.catastrophic_error if hasattr(results, "catastrophic_error") else None
    return {"questions": out, "error": None if error is None else repr(error)}


def main(argv=None) -> int:
    notebook, autograder, target = argv if argv is not None else sys.argv[1:]
    try:
        data = run(notebook, autograder)
    except Exception as exc:                 # noqa: BLE001 (reported to the parent, in words)
        data = {"questions": {}, "error": f"{type(exc).__name__}: {exc}"}
    with open(target, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
