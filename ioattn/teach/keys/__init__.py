"""What the grader computes and a graded notebook must not: the assignments' own answers.

The checks (:mod:`ioattn.teach.assignments`) import these modules when they check an answer.
The notebook's process being graded never loads them and cannot read them
(:mod:`ioattn.teach.sandbox` leaves this folder out), so a tile program or a function handed in
cannot call the grader's answers on the hidden sizes. They ship with the package (students run
the same checks on their own instance), so their code is public: ``ioattn grade --similar``
also compares each notebook with it.
"""
