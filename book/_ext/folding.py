"""Sphinx extension: long proofs fold, so that a first reading can pass over them.

A proof (the ``{prf:proof}`` directive of sphinx-proof) longer than :data:`LONG` characters of
text, about one phone screen, is folded as the exercises' solutions are: its title reads
"Proof (can be skipped on a first reading)" and a tap on it unfolds the proof (the ``dropdown``
class, which sphinx-togglebutton folds). The statement it proves, and the intuition the chapter
gives before it, stay in view. A proof given the class ``unfolded`` (``:class: unfolded``) never
folds; one given ``dropdown`` always does. The book's PDF prints every proof unfolded
(``book/_ext/pdf.py`` unfolds every fold before printing).

A sentence "... can be skipped on a first reading." that opens a folded proof is dropped: the
title says it.
"""

from __future__ import annotations

import re

from docutils import nodes

#: Characters of text from which a proof folds (a 390 px phone shows about 1,200 in a screen).
LONG = 1200
#: What the title of a folded proof adds.
HINT = " (can be skipped on a first reading)"
_SKIP = re.compile(r"can be skipped on a first reading\.?$", re.I)


def _is_proof(node) -> bool:
    """A ``{prf:proof}``: sphinx-proof makes it an admonition with id and classes "proof", its
    first paragraph opening with the word "Proof. " (it has no title)."""
    return node.get("ids") == ["proof"] and node["classes"][:2] == ["proof", "proof"]


def _drop_word(paragraph) -> None:
    """Take the word "Proof. " that sphinx-proof put in front of the first paragraph."""
    text = paragraph.children[0] if paragraph.children else None
    if isinstance(text, nodes.Text) and str(text).startswith("Proof. "):
        rest = str(text)[len("Proof. "):]
        if rest:
            paragraph.replace(text, nodes.Text(rest))
        else:
            paragraph.remove(text)


def _in_fold(node) -> bool:
    """Whether the proof already sits in a folded box (a dropdown admonition)."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.Element) and "dropdown" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


def fold_long_proofs(app, doctree):
    """Fold the proofs longer than :data:`LONG` characters (or given ``dropdown``): a title
    "Proof (can be skipped on a first reading)" that unfolds them."""
    folded = 0
    for node in list(doctree.findall(nodes.admonition)):
        if not _is_proof(node) or "unfolded" in node["classes"] or _in_fold(node):
            continue
        if "dropdown" not in node["classes"] and len(node.astext()) <= LONG:
            continue
        if "dropdown" not in node["classes"]:
            node["classes"].append("dropdown")
        # sphinx-proof gives every proof the id "proof"; the fold button finds its proof by id
        folded += 1
        node["ids"] = [f"proof-{folded}"]
        first = node.children[0] if node.children else None
        if isinstance(first, nodes.paragraph):
            _drop_word(first)
            if _SKIP.search(first.astext().strip()) and len(first.astext()) < 120:
                node.remove(first)
        node.insert(0, nodes.title("", "Proof" + HINT))


def setup(app):
    app.connect("doctree-read", fold_long_proofs)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
