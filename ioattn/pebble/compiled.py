"""The exact pebbling search of :mod:`ioattn.pebble.search`, compiled to machine code with Numba.

:func:`run` performs the same A* search as :meth:`ioattn.pebble.search._Search.run`, whose
exactness the module docstring of :mod:`ioattn.pebble.search` proves: the same canonical moves
(one placement -- a read or a compute -- with its eviction, plain or spilled (rules 1 and 2),
then the deterministic closure of rules 3-5; no fresh plain eviction (rule 6) and no undoing an
eviction (rule 7), both read off the parent record; no dominated read (rule 8)), the same
admissible and consistent heuristic (``_Search.needed``: the pending outputs, the needed inputs,
and the term ``E`` over the tight and deep families, with its memo of ``assembles``), and the same
order of expansion: least ``f = g + h`` first, ties to the state pushed last. That order is
total, so both engines expand the same states in the same order and return the same optimum
(``tests/pebble/test_compiled.py`` checks states expanded and I/O on many graphs). Only the
representation differs.

State layout (``n <= 64`` vertices; a set of vertices is a ``uint64`` bit mask, bit ``i`` for
``graph.order[i]``):

- *Table*: the states themselves, by open addressing with linear probing on a hash of ``(red,
  blue)``, the canonical form of the state (rule 9); a slot is three ``uint64`` words, 24
  bytes: ``red``, ``blue`` and a word packing ``g`` (13 bits: the least cost found; every ``g``
  and ``f`` stays below 2**13, see :func:`_search`), *expanded* (1 bit: the cost is final, as
  the Python search's negative ``best``), the step that reached the state at that cost -- ``x``
  placed (6 bits), ``u`` evicted (7 bits, 64 for none), spill, read, and *same* (the closure
  did nothing), from which rules 6 and 7 read ``fresh`` and ``undone`` --, the automorphism
  that maps the state as that step reached it to the canonical form (4 bits: the inverse
  image is the state expanded), and the parent's slot plus one (30 bits, 0 at the start). An
  empty slot is all zeros. The table holds at most 70% of its slots, and at
  least about 35% once it has grown.
- *Queue*: the Python search orders its heap by ``(f, -counter)``: least ``f`` first and, within
  an ``f``, the entry pushed last. So does a stack per value of ``f`` (a bucket queue), with
  pushes and pops in constant time: nodes ``(slot int32, g int16, next int32)``, 10 bytes, in a
  pool with a free list; ``heads[f]`` is the top of the stack of ``f``. As in the Python search,
  an entry whose ``g`` is no longer its state's (or whose state was expanded) is stale and
  skipped when popped.
- *Memo* of ``assembles(v, red)``, keyed by ``v`` and the red non-input ancestors of ``v`` (a
  ``uint64`` key and a byte holding ``v + 1`` and the answer), and a scratch table for the
  recursion of ``_assemble`` (stamped with the call, so never cleared). Both are caches: an
  insert into a full one is dropped (and the table grown before the next expansion).

Each expansion computes the ``h`` of a successor first, drops it if its ``f`` reaches the
incumbent's I/O (``min_io(..., incumbent=...)``; never without one), and only then finds its
canonical form, from the images of the state expanded (an automorphism maps bits to bits, so a
successor's image is the parent's with a few bits flipped), and its slot. Where the heuristic
has no term ``E``, the ``h`` of a successor that evicts ``u`` comes from one count of the state
with ``u`` evicted, whatever is placed (:func:`_h_evicting`): a handful of counts per expansion
instead of one per successor.

With ``threads`` above 1 (:func:`_threaded`), the search runs in batches: up to
:data:`_SHARE` states per thread of the least ``f`` come off the queue, the threads list their
successors side by side, each with a memo of its own, keeping those the table does not hold at
no more cost (they only read the table), and the main thread then records and pushes them, one
thread's after the other's. A state of the least ``f`` has its least cost already, so the order
within a batch does not change the optimum; it changes which states are expanded, a little.

Every array doubles when it runs short (the table is rehashed, and the slots named by parents and
queue entries renumbered). The compiled function :func:`_step` expands states until a check point
(a number of expansions), the goal, or an array that might not hold the next expansion's
successors; it then returns to Python, which checks ``max_states`` and the clock, updates the
progress bar and grows the arrays, as the Python search does every 1024 states. ``Optimum.memory``
(and ``SearchLimitError.memory``) is the size of all these arrays at the end.

Numba compiles the kernels on first use (never when :mod:`ioattn` is imported) and caches the
machine code on disk where it can write (``__pycache__`` beside this file, or Numba's user cache);
where no cache location is writable (a read-only installation, a sandbox), it compiles in memory.
Without Numba, :func:`available` is False and :func:`ioattn.pebble.min_io` uses the Python
search.
"""

from __future__ import annotations

import time

import numpy as np

from .._validate import as_threads
from .search import (
    PROGRESS_AFTER,
    Optimum,
    _limit_error,
    _progress_bar,
    _Search,
)

__all__ = ["MAX_VERTICES", "available", "compile_seconds", "run"]

#: The most vertices the compiled search takes: a state's masks are 64-bit words.
MAX_VERTICES = 64

# _step's answers
_CHECK, _GOAL, _GROW, _EMPTY = 0, 1, 2, 3
# slots of the counter array ``ctr``
(_EXPANDED, _COUNT, _FREE, _POOL, _QSIZE, _FMIN, _PENDING, _LAST_F, _GOAL_AT, _MEMO_COUNT,
 _MEMO_FULL, _SC_GEN, _SC_FULL, _BAD_F) = range(14)
_CTR = 14
_NONE = 64                  # the field u of a record when nothing was evicted

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U7 = np.uint64(7)
_U63 = np.uint64(63)
_U127 = np.uint64(127)
_GMASK = np.uint64((1 << 13) - 1)       # a record's third word: g (13 bits),
_DONE = np.uint64(1 << 13)              # expanded (1 bit),
_S14 = np.uint64(14)                    # x (6 bits),
_S20 = np.uint64(20)                    # u (7 bits),
_S27 = np.uint64(27)                    # spill | read << 1 | same << 2 (3 bits)
_S30 = np.uint64(30)                    # the automorphism that gives the canonical form of
#                                         the state its step reached (4 bits, rule 9)
_S34 = np.uint64(34)                    # and parent + 1 (30 bits)
_U15 = np.uint64(15)
_H1 = np.uint64(0x9E3779B97F4A7C15)
_H2 = np.uint64(0xC2B2AE3D27D4EB4F)
_H3 = np.uint64(0xBF58476D1CE4E5B9)
_S29 = np.uint64(29)
_U8 = np.uint64(8)
_U255 = np.uint64(255)
_S31 = np.uint64(31)


# ------------------------------------------------------------------------------ bit intrinsics
def _popcount(typingctx, x):
    """The number of set bits of a uint64 (LLVM's ctpop)."""
    from numba import types

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])
    return types.int64(types.uint64), codegen


def _low(typingctx, x):
    """The index of the lowest set bit of a non-zero uint64 (LLVM's cttz)."""
    from llvmlite import ir
    from numba import types

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))
    return types.int64(types.uint64), codegen


def _prefetch(typingctx, array, index):
    """Ask the memory for ``array[index]`` ahead of use (LLVM's prefetch, for reading)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils

    def codegen(context, builder, signature, args):
        kind = signature.args[0]
        data = context.make_array(kind)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, kind, data, [args[1]],
                                           wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
            "llvm.prefetch.p0")
        builder.call(function, [builder.bitcast(pointer, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.void(array, types.int64), codegen


def _high(typingctx, x):
    """The index of the highest set bit of a non-zero uint64 (63 minus LLVM's ctlz)."""
    from llvmlite import ir
    from numba import types

    def codegen(context, builder, signature, args):
        lead = builder.ctlz(args[0], ir.Constant(ir.IntType(1), 1))
        return builder.sub(ir.Constant(ir.IntType(64), 63), lead)
    return types.int64(types.uint64), codegen


# ---------------------------------------------------------------------------- the game's canon
def _hash(a, b):
    """A 64-bit hash of two words (multiply and xor-shift mixing)."""
    h = a * _H1 ^ b * _H2
    h ^= h >> _S31
    h *= _H3
    h ^= h >> _S29
    return h


def _live(pending, anc):
    """The vertices of use while the outputs ``pending`` are still to be written (rule 4)."""
    lv = _U0
    while pending:
        lv |= anc[_low(pending)]
        pending &= pending - _U1
    return lv


def _close(red, blue, M, inp, out, anc, pm):
    """``_Search.close`` (rules 3-5): ``(red, blue, writes made)``."""
    writes = 0
    live = _live(out & ~blue, anc)
    while True:
        ready = out & red & ~blue
        if ready:                                   # rule 3
            blue |= ready & (~ready + _U1)
            writes += 1
            live = _live(out & ~blue, anc)
            red &= live                             # rule 4
            continue
        if _popcount(red) < M:                      # rule 5
            cand = live & ~red & ~inp
            i = 0
            while cand:
                i = _low(cand)
                if not pm[i] & ~red:
                    break
                cand &= cand - _U1
            if cand:
                red |= _U1 << np.uint64(i)
                continue
        break
    blue &= live | out | inp
    return red, blue, writes


def _sc_find(sc_key, sc_stamp, X, gen):
    """The scratch slot of ``X`` in generation ``gen``: found (its value 0/1) or free (-1)."""
    mask = sc_key.shape[0] - 1
    slot = np.int64(_hash(X, _H1) & np.uint64(mask))
    while sc_stamp[slot] >> 1 == gen:
        if sc_key[slot] == X:
            return slot, sc_stamp[slot] & 1
        slot = (slot + 1) & mask
    return slot, -1


def _assemble(X0, red, M, inp, pm, sc_key, sc_stamp, ctr):
    """``_Search._assemble(X0, red, {})``, its recursion on an explicit stack, its memo the
    scratch table (stamped with a generation per call)."""
    if not X0 & ~red:
        return True
    gen = ctr[_SC_GEN] + 1
    ctr[_SC_GEN] = gen
    room = sc_key.shape[0] * 9 // 10
    used = 0
    cap = 64
    st_x = np.empty(cap, np.uint64)
    st_rest = np.empty(cap, np.uint64)
    st_x[0] = X0
    st_rest[0] = X0
    depth = 1
    ret = -1                     # the value of the frame just popped (-1: none)
    while depth > 0:
        X = st_x[depth - 1]
        result = 0
        descend = False
        if ret == 1:             # a y worked
            result = 1
        else:
            rest = st_rest[depth - 1]
            fits = _popcount(X) <= M
            while rest:
                y = _low(rest)
                ybit = _U1 << np.uint64(y)
                rest ^= ybit
                if inp & ybit:
                    if not fits:
                        continue
                    child = X ^ ybit
                else:
                    both = X | pm[y]
                    if _popcount(both) > M:
                        continue
                    child = both ^ ybit
                if not child & ~red:
                    result = 1
                    break
                slot, known = _sc_find(sc_key, sc_stamp, child, gen)
                if known == 1:
                    result = 1
                    break
                if known == 0:
                    continue
                st_rest[depth - 1] = rest
                if depth == cap:
                    cap *= 2
                    grown = np.empty(cap, np.uint64)
                    grown[:depth] = st_x[:depth]
                    st_x = grown
                    grown = np.empty(cap, np.uint64)
                    grown[:depth] = st_rest[:depth]
                    st_rest = grown
                st_x[depth] = child
                st_rest[depth] = child
                depth += 1
                descend = True
                break
        if descend:
            ret = -1
            continue
        slot, known = _sc_find(sc_key, sc_stamp, X, gen)
        if used < room:
            sc_key[slot] = X
            sc_stamp[slot] = gen << 1 | result
            used += 1
        else:
            ctr[_SC_FULL] = 1
        depth -= 1
        ret = result
    return ret == 1


def _assembles(v, red, M, inp, pm, anc, mem):
    """``_Search.assembles``: its memo an open-addressing table keyed by ``(v, red)``."""
    m_key, m_info, sc_key, sc_stamp, ctr = mem
    red &= anc[v] & ~inp
    mask = m_key.shape[0] - 1
    tag = v + 1
    slot = np.int64(_hash(red, np.uint64(tag)) & np.uint64(mask))
    while m_info[slot]:
        if m_key[slot] == red and (m_info[slot] & 127) == tag:
            return m_info[slot] >> 7 == 1
        slot = (slot + 1) & mask
    ok = _assemble(pm[v], red, M, inp, pm, sc_key, sc_stamp, ctr)
    if (ctr[_MEMO_COUNT] + 1) * 10 <= m_key.shape[0] * 9:
        m_key[slot] = red
        m_info[slot] = tag | (128 if ok else 0)
        ctr[_MEMO_COUNT] += 1
    else:
        ctr[_MEMO_FULL] = 1
    return ok


def _tight_cost(red, blue, seen, M, inp, out, pm, anc, tight, deep, mem):
    """``_Search.tight_cost``: the term ``E`` of the heuristic."""
    e = 0
    d = 0
    done = red | blue
    ends = blue | out
    for k in range(tight.shape[0]):
        v = tight[k, 0]
        ops = tight[k, 1]
        if seen & v and not done & v and ops & ~red:
            e += 1 if ops & ends else 2
    for k in range(deep.shape[0]):
        vbit = deep[k, 0]
        if seen & vbit and not done & vbit and not _assembles(
                np.int64(deep[k, 1]), red, M, inp, pm, anc, mem):
            d += 1 if deep[k, 2] & ends else 2
    return e if e > d else d


def _needed(red, blue, M, inp, out, pm, anc, tight, deep, mem):
    """``_Search.needed``: ``(h, seen, E)``."""
    pending = out & ~blue
    front = pending & ~red
    h = _popcount(pending)
    if not front:
        return h, _U0, 0
    seen = front
    closed = red | blue
    while front:
        i = _high(front)
        front ^= _U1 << np.uint64(i)
        new = pm[i] & ~seen
        if new:
            seen |= new
            front |= new & ~closed
    e = 0
    if tight.shape[0] or deep.shape[0]:
        e = _tight_cost(red, blue, seen, M, inp, out, pm, anc, tight, deep, mem)
    return h + _popcount(seen & inp & ~red) + e, seen, e


def _h_evicting(h_u, seen_u, inp, xbit):
    """The ``h`` of the state ``(red - u + x, blue)``, from ``h_u`` and ``seen_u`` of ``_needed(red
    - u, blue)``, where ``u`` is red and not blue, and ``x`` (bit ``xbit``), neither red nor a
    pending output, is read (``x`` blue) or computed (a non-input whose operands are red and not
    ``u``), when the heuristic has no term ``E`` (no tight or deep family): ``h_u``, less one if
    ``x`` is an input that ``seen_u`` holds.

    Both states have the same pending outputs and the same front ``pending - red`` (``x`` is
    not pending), and their traversals agree but at ``x``, closed in ``(red - u + x, blue)``.
    If ``x`` is read it is blue, so closed in both. If it is computed, the other traversal may
    pass ``x``, adding its operands; they are red in both states, so they stop the traversal
    and are counted in neither. The inputs counted thus differ only by ``x``, red in one state
    only. So one ``_needed`` per evicted ``u`` serves every ``x`` placed with it.
    """
    return h_u - 1 if seen_u & inp & xbit else h_u


def _image(mask, ptab, k):
    """The image of the vertex set ``mask`` under the ``k``-th automorphism (its byte tables)."""
    out = _U0
    j = 0
    while mask:
        out |= ptab[k, j, np.int64(mask & _U255)]
        mask >>= _U8
        j += 1
    return out


def _canonical(r, b, dr, db, img, ptab):
    """``Symmetry.canonical(r, b)``: the least image of ``(r, b)`` (``b`` compared first) and
    the first automorphism that gives it, from the images ``img[0, k]``, ``img[1, k]`` of a
    state that differs from ``(r, b)`` in the vertices ``dr``, ``db`` (an automorphism maps
    bits to bits, so the image of ``r`` is that of ``r ^ dr`` with the bits of ``dr`` flipped).
    """
    best_r = r
    best_b = b
    best = 0
    for k in range(1, ptab.shape[0]):
        bb = img[1, k]
        d = db
        while d:
            i = _low(d)
            d &= d - _U1
            bb ^= ptab[k, i >> 3, 1 << (i & 7)]
        if bb > best_b:
            continue
        rr = img[0, k]
        d = dr
        while d:
            i = _low(d)
            d &= d - _U1
            rr ^= ptab[k, i >> 3, 1 << (i & 7)]
        if bb < best_b or rr < best_r:
            best_r = rr
            best_b = bb
            best = k
    return best_r, best_b, best


# ------------------------------------------------------------------------------------------ A*
def _find(rec, r, b, hh):
    """The slot of the state ``(r, b)`` of hash ``hh`` in the table ``rec``, and whether it is
    there (if not, the slot is where it goes)."""
    tmask = rec.shape[0] // 3 - 1
    slot = np.int64(hh & np.uint64(tmask))
    while True:
        if rec[3 * slot + 2] == _U0:
            return slot, False
        if rec[3 * slot] == r and rec[3 * slot + 1] == b:
            return slot, True
        slot = (slot + 1) & tmask


def _successors(sid, k, M, inp, out, related, pm, anc, tight, deep, mem, rec, ptab, itab,
                limit, img, ub, ib):
    """List the successors of the record ``sid`` whose ``f`` is below ``limit`` (the closure
    applied, in the Python search's order) in the buffers from column ``k`` on, asking the
    memory for their table slots ahead of use; return the column after the last.

    The buffers, a column per successor: ``ub`` (uint64) its canonical form (red, blue; rule 9),
    the automorphism that gives it and its hash; ``ib`` (int64) its step (x placed, u evicted
    or -1, flags spill | read << 1 | same << 2), ``g``, ``f`` and the parent's slot. ``img``
    (uint64, 4 x 64): room for the images of the state expanded under each automorphism (rows
    0 and 1, red and blue) and, by vertex ``u``, the ``seen`` and ``h`` of the state with ``u``
    evicted (rows 2 and 3; see :func:`_h_evicting`)."""
    tmask = rec.shape[0] // 3 - 1
    meta = rec[3 * sid + 2]
    red = rec[3 * sid]
    blue = rec[3 * sid + 1]
    sym = np.int64(meta >> _S30 & _U15)
    if sym:                                 # the image the recorded step reached (rule 9)
        red = _image(red, itab, sym)
        blue = _image(blue, itab, sym)
    g = np.int64(meta & _GMASK)
    last_x = np.int64(meta >> _S14 & _U63)
    last_u = np.int64(meta >> _S20 & _U127)
    flags = np.int64(meta >> _S27 & _U7)
    fresh = last_x if flags & 4 else -1
    undone = last_u if flags & 4 and not flags & 1 and last_u != _NONE else -1
    keep = _U0
    if undone >= 0:
        # rule 7: re-placing `undone` may only evict what the parent could not have
        # evicted instead of it when placing x: an operand of a computed x, or x itself
        keep = _U1 << np.uint64(last_x)
        if not flags & 2:
            keep |= red & pm[last_x]
    for j in range(1, ptab.shape[0]):      # its images, whence its successors' (rule 9)
        img[0, j] = _image(red, ptab, j)
        img[1, j] = _image(blue, ptab, j)
    hs, seen, es = _needed(red, blue, M, inp, out, pm, anc, tight, deep, mem)
    plain = tight.shape[0] == 0 and deep.shape[0] == 0   # the heuristic has no term E
    known = _U0                 # the vertices u of img[2:4, u]
    pend = out & ~blue
    live = _live(pend, anc)
    free = _popcount(red) < M
    cand = live & ~red
    xs = cand & blue
    comp = _U0
    if not free:
        c = cand & ~inp
        while c:
            i = _low(c)
            c &= c - _U1
            if not pm[i] & ~red:
                comp |= _U1 << np.uint64(i)
        xs |= comp
    # the successors (x placed, u evicted, flags spill | read << 1 | same << 2), in the
    # Python search's order
    while xs:
        x = _low(xs)
        low = _U1 << np.uint64(x)
        xs ^= low
        must_close = free or (low & pend) != 0
        hx = hs - 1 if seen & inp & low else hs
        k0 = k
        if free:
            ib[1, k] = -1
            ib[2, k] = 2
            k += 1
        else:
            ops = pm[x]
            for group in range(2):
                if comp & low:
                    if group == 0:              # compute, evicting a non-operand
                        e = red & ~ops
                        is_read = 0
                    elif blue & low:            # read, evicting an operand (rule 8)
                        e = red & ops
                        is_read = 1
                    else:
                        break
                elif group == 0:
                    e = red
                    is_read = 1
                else:
                    break
                if x == undone:
                    e &= keep
                while e:
                    u = _low(e)
                    e &= e - _U1
                    if u != fresh:              # rule 6
                        ib[1, k] = u
                        ib[2, k] = is_read << 1
                        k += 1
                    if not blue & (_U1 << np.uint64(u)):    # rule 2: spill if not blue
                        ib[1, k] = u
                        ib[2, k] = is_read << 1 | 1
                        k += 1
        kept = k0
        for j in range(k0, k):
            u = ib[1, j]
            fl = ib[2, j]
            spill = fl & 1
            ubit = _U0
            if u < 0:
                r = red | low
                b = blue
            else:
                ubit = _U1 << np.uint64(u)
                r = red ^ ubit | low
                b = blue | ubit if spill else blue
            w = 0
            same = True
            if must_close:
                r2, b2, w = _close(r, b, M, inp, out, anc, pm)
                same = r2 == r and b2 == b
                r = r2
                b = b2
            g2 = g + (fl >> 1) + spill + w
            # h of the new state from hs, as in the Python search (h is equal on images)
            rel = related
            if not same:
                h2 = _needed(r, b, M, inp, out, pm, anc, tight, deep, mem)[0]
                rel = _U0
            elif u < 0 or spill or not seen & ubit:
                h2 = hx
            elif blue & ubit:
                h2 = hx + (1 if inp & ubit else 0)
            elif plain:
                if not known & ubit:
                    hu, su, _ = _needed(red ^ ubit, blue, M, inp, out, pm, anc, tight, deep,
                                        mem)
                    img[2, u] = su
                    img[3, u] = hu
                    known |= ubit
                h2 = _h_evicting(np.int64(img[3, u]), img[2, u], inp, low)
            else:
                h2 = _needed(r, b, M, inp, out, pm, anc, tight, deep, mem)[0]
                rel = _U0
            if rel and (low | ubit) & rel:
                h2 += _tight_cost(r, b, seen, M, inp, out, pm, anc, tight, deep, mem) - es
            if g2 + h2 >= limit:        # no cheaper game than the incumbent's here
                continue
            ib[1, kept] = u
            ib[2, kept] = fl | 4 if same else fl
            ib[3, kept] = g2
            ib[4, kept] = g2 + h2
            ib[5, kept] = sid
            ib[0, kept] = x
            r, b, sym = _canonical(r, b, r ^ red, b ^ blue, img, ptab)
            ub[0, kept] = r
            ub[1, kept] = b
            ub[2, kept] = sym
            hh = _hash(r, b)
            ub[3, kept] = hh
            slot = 3 * np.int64(hh & np.uint64(tmask))
            _prefetch(rec, slot)
            _prefetch(rec, slot + 2)
            kept += 1
        k = kept
    return k


def _insert(lo, hi, ub, ib, rec, heads, q_id, q_g, q_next, ctr, count, free_node, pool,
            qsize, fmin):
    """Record and push the successors in columns ``lo:hi`` of the buffers (see
    :func:`_successors`), in order, those not reached before at no more cost; return the
    queue's counters ``(count, free_node, pool, qsize, fmin)`` updated."""
    n_heads = heads.shape[0]
    tmask = rec.shape[0] // 3 - 1
    ahead = 16                  # ask the memory for the slot of the successor so far ahead
    for j in range(lo, hi):
        if j + ahead < hi:
            _prefetch(rec, 3 * np.int64(ub[3, j + ahead] & np.uint64(tmask)))
        g2 = ib[3, j]
        s2, there = _find(rec, ub[0, j], ub[1, j], ub[3, j])
        if there:
            old = rec[3 * s2 + 2]
            if old & _DONE or np.int64(old & _GMASK) <= g2:
                continue
        else:
            count += 1
            rec[3 * s2] = ub[0, j]
            rec[3 * s2 + 1] = ub[1, j]
        u = ib[1, j]
        rec[3 * s2 + 2] = (np.uint64(g2) | np.uint64(ib[0, j]) << _S14
                           | np.uint64(u if u >= 0 else _NONE) << _S20
                           | np.uint64(ib[2, j]) << _S27 | ub[2, j] << _S30
                           | np.uint64(ib[5, j] + 1) << _S34)
        f2 = ib[4, j]
        if f2 >= n_heads:                   # (cannot happen: see _search)
            ctr[_BAD_F] = f2
            f2 = n_heads - 1
        if free_node >= 0:
            node = free_node
            free_node = q_next[node]
        else:
            node = pool
            pool += 1
        q_id[node] = s2
        q_g[node] = g2
        q_next[node] = heads[f2]
        heads[f2] = node
        qsize += 1
        if f2 < fmin:
            fmin = f2
    return count, free_node, pool, qsize, fmin


def _pop(out, rec, heads, q_id, q_next, q_g, ctr, free_node, qsize, fmin, f_cap):
    """Take the next state off the queue: the top of the stack of the least ``f`` (at most
    ``f_cap``), skipping stale entries (pushed again at a lower cost since, or expanded), and
    mark it expanded. Return ``(slot, free_node, qsize, fmin)``: ``slot`` -1 if no state is
    left (of ``f <= f_cap``), ``-2 - slot`` for a goal (left unexpanded)."""
    while qsize > 0:
        while heads[fmin] < 0:
            fmin += 1
        if fmin > f_cap:
            break
        node = heads[fmin]
        heads[fmin] = q_next[node]
        q_next[node] = free_node
        free_node = node
        qsize -= 1
        sid = np.int64(q_id[node])
        g = np.int64(q_g[node])
        ctr[_LAST_F] = fmin
        meta = rec[3 * sid + 2]
        if meta & _DONE or np.int64(meta & _GMASK) != g:
            continue
        if not out & ~rec[3 * sid + 1]:
            return -2 - sid, free_node, qsize, fmin
        rec[3 * sid + 2] = meta | _DONE
        return sid, free_node, qsize, fmin
    return -1, free_node, qsize, fmin


def _buffers(columns):
    """Empty buffers for ``columns`` successors (see :func:`_successors`) and ``img``."""
    return (np.empty((4, columns), np.uint64), np.empty((6, columns), np.int64),
            np.empty((4, 64), np.uint64))


def _step(stop_at, M, inp, out, related, pm, anc, tight, deep, mem, rec, heads, q_id, q_g,
          q_next, ptab, itab, limit):
    """Expand states (``_Search.run``'s loop), recording and pushing only successors of ``f <
    limit`` (the incumbent's I/O), until ``ctr[_EXPANDED]`` reaches ``stop_at``
    (``_CHECK``: the state counted last is left in ``ctr[_PENDING]``, to be expanded on the next
    call), the goal is popped (``_GOAL``), a table is short of room for an expansion
    (``_GROW``), or the queue is empty (``_EMPTY``).

    An expansion lists its successors first (:func:`_successors`), then takes them in order as
    the Python search does (:func:`_insert`)."""
    ctr = mem[4]
    margin = 2 * pm.shape[0] * M + 2        # successors of one state: at most n x 2M
    room = (rec.shape[0] // 3 * 7) // 10
    ub, ib, img = _buffers(margin)
    expanded = ctr[_EXPANDED]
    count = ctr[_COUNT]
    free_node = ctr[_FREE]
    pool = ctr[_POOL]
    qsize = ctr[_QSIZE]
    fmin = ctr[_FMIN]
    pending = ctr[_PENDING]
    status = _EMPTY
    while True:
        if pending < 0:
            sid, free_node, qsize, fmin = _pop(out, rec, heads, q_id, q_next, q_g, ctr,
                                               free_node, qsize, fmin, heads.shape[0])
            if sid == -1:
                status = _EMPTY
                break
            if sid < -1:
                ctr[_GOAL_AT] = -2 - sid
                status = _GOAL
                break
            expanded += 1
            pending = sid
            if expanded >= stop_at:
                status = _CHECK
                break
        if (count + margin > room or qsize + margin > q_id.shape[0]
                or 2 * ctr[_MEMO_COUNT] > mem[0].shape[0] or ctr[_MEMO_FULL] or ctr[_SC_FULL]):
            status = _GROW
            break
        k = _successors(pending, 0, M, inp, out, related, pm, anc, tight, deep, mem, rec, ptab,
                        itab, limit, img, ub, ib)
        pending = -1
        count, free_node, pool, qsize, fmin = _insert(0, k, ub, ib, rec, heads, q_id, q_g,
                                                      q_next, ctr, count, free_node, pool,
                                                      qsize, fmin)
    ctr[_EXPANDED] = expanded
    ctr[_COUNT] = count
    ctr[_FREE] = free_node
    ctr[_POOL] = pool
    ctr[_QSIZE] = qsize
    ctr[_FMIN] = fmin
    ctr[_PENDING] = pending
    return status



# -------------------------------------------------------------------- A* on several threads
def _pop_batch(size, sids, out, rec, heads, q_id, q_next, q_g, ctr):
    """Take up to ``size`` entries of the least ``f`` off the queue, and keep in ``sids`` the
    states among them that are not stale (as :func:`_pop`, but asking the memory for all their
    records first), marked expanded; return their number, or -1 if one is a goal (its slot in
    ``ctr[_GOAL_AT]``; the search ends)."""
    kept = 0
    while kept == 0 and ctr[_QSIZE] > 0:    # (a batch may hold stale entries only)
        kept = _pop_some(size, sids, out, rec, heads, q_id, q_next, q_g, ctr)
    return kept


def _pop_some(size, sids, out, rec, heads, q_id, q_next, q_g, ctr):
    """:func:`_pop_batch` once: the states kept may be none."""
    free_node = ctr[_FREE]
    qsize = ctr[_QSIZE]
    fmin = ctr[_FMIN]
    m = 0
    if qsize > 0:
        while heads[fmin] < 0:
            fmin += 1
        ctr[_LAST_F] = fmin
        while m < size and heads[fmin] >= 0:
            node = heads[fmin]
            heads[fmin] = q_next[node]
            q_next[node] = free_node
            free_node = node
            qsize -= 1
            sid = np.int64(q_id[node])
            sids[m] = sid
            sids[size + m] = q_g[node]
            _prefetch(rec, 3 * sid)
            m += 1
    ctr[_FREE] = free_node
    ctr[_QSIZE] = qsize
    ctr[_FMIN] = fmin
    kept = 0
    for i in range(m):
        sid = sids[i]
        meta = rec[3 * sid + 2]
        if meta & _DONE or np.int64(meta & _GMASK) != sids[size + i]:
            continue                        # stale: pushed again at a lower cost since
        if not out & ~rec[3 * sid + 1]:
            ctr[_GOAL_AT] = sid
            return -1
        rec[3 * sid + 2] = meta | _DONE
        sids[kept] = sid
        kept += 1
    ctr[_EXPANDED] += kept
    return kept


def _expand(sids, lo, hi, M, inp, out, related, pm, anc, tight, deep, mem, rec, ptab, itab,
            limit, img, ub, ib):
    """The successors of the states ``sids[lo:hi]`` (:func:`_successors`) that the table does
    not hold at no more cost, into the buffers, as long as they have room for another state's;
    return ``(i, k)``: the states ``sids[lo:i]`` were expanded, into ``k`` columns. Reads the
    table, writes nothing shared but ``mem`` (a thread's own): threads run it side by side."""
    margin = 2 * pm.shape[0] * M + 2
    k = 0
    i = lo
    while i < hi and k + margin <= ub.shape[1]:
        k0 = k
        k = _successors(sids[i], k, M, inp, out, related, pm, anc, tight, deep, mem, rec, ptab,
                        itab, limit, img, ub, ib)
        kept = k0
        for j in range(k0, k):
            s2, there = _find(rec, ub[0, j], ub[1, j], ub[3, j])
            if there:
                old = rec[3 * s2 + 2]
                if old & _DONE or np.int64(old & _GMASK) <= ib[3, j]:
                    continue
            if kept < j:
                ub[:, kept] = ub[:, j]
                ib[:, kept] = ib[:, j]
            kept += 1
        k = kept
        i += 1
    return i, k


def _unpop(sids, lo, hi, f, heads, q_id, q_g, q_next, rec, ctr):
    """Put the states ``sids[lo:hi]``, taken off the queue at ``f`` but not expanded, back."""
    for i in range(lo, hi):
        sid = sids[i]
        meta = rec[3 * sid + 2] & ~_DONE
        rec[3 * sid + 2] = meta
        node = ctr[_FREE]
        if node >= 0:
            ctr[_FREE] = q_next[node]
        else:
            node = ctr[_POOL]
            ctr[_POOL] = node + 1
        q_id[node] = sid
        q_g[node] = np.int64(meta & _GMASK)
        q_next[node] = heads[f]
        heads[f] = node
        ctr[_QSIZE] += 1
        if f < ctr[_FMIN]:
            ctr[_FMIN] = f
    ctr[_EXPANDED] -= hi - lo


def _insert_all(k, ub, ib, rec, heads, q_id, q_g, q_next, ctr):
    """:func:`_insert` of the buffers' first ``k`` columns, the counters kept in ``ctr``."""
    count, free_node, pool, qsize, fmin = _insert(
        0, k, ub, ib, rec, heads, q_id, q_g, q_next, ctr, ctr[_COUNT], ctr[_FREE], ctr[_POOL],
        ctr[_QSIZE], ctr[_FMIN])
    ctr[_COUNT] = count
    ctr[_FREE] = free_node
    ctr[_POOL] = pool
    ctr[_QSIZE] = qsize
    ctr[_FMIN] = fmin


def _rehash(rec, old, q_id, pool, ctr):
    """Move the states of the table ``old`` into the empty, larger table ``rec``, and renumber
    the slots that the records' parents, the queue's entries and ``ctr[_PENDING]`` name."""
    tmask = rec.shape[0] // 3 - 1
    moved = np.empty(old.shape[0] // 3, np.int64)
    ahead = 16                  # ask the memory for the slot of the record so far ahead
    for s in range(old.shape[0] // 3):
        a = s + ahead
        if a < old.shape[0] // 3 and old[3 * a + 2] != _U0:
            _prefetch(rec, 3 * np.int64(_hash(old[3 * a], old[3 * a + 1]) & np.uint64(tmask)))
        if old[3 * s + 2] != _U0:
            slot = np.int64(_hash(old[3 * s], old[3 * s + 1]) & np.uint64(tmask))
            while rec[3 * slot + 2] != _U0:
                slot = (slot + 1) & tmask
            rec[3 * slot] = old[3 * s]
            rec[3 * slot + 1] = old[3 * s + 1]
            rec[3 * slot + 2] = old[3 * s + 2]
            moved[s] = slot
    keep = (_U1 << _S34) - _U1
    for s in range(rec.shape[0] // 3):
        meta = rec[3 * s + 2]
        if meta >> _S34:
            parent = moved[np.int64(meta >> _S34) - 1]
            rec[3 * s + 2] = meta & keep | np.uint64(parent + 1) << _S34
    for node in range(pool):
        q_id[node] = moved[q_id[node]]
    if ctr[_PENDING] >= 0:
        ctr[_PENDING] = moved[ctr[_PENDING]]


def _rehash_memo(m_key, m_info, old_key, old_info):
    """Insert the entries of the old memo table into the empty ``m_key, m_info``."""
    mask = m_key.shape[0] - 1
    for j in range(old_key.shape[0]):
        if old_info[j]:
            slot = np.int64(_hash(old_key[j], np.uint64(old_info[j] & 127)) & np.uint64(mask))
            while m_info[slot]:
                slot = (slot + 1) & mask
            m_key[slot] = old_key[j]
            m_info[slot] = old_info[j]


# ------------------------------------------------------------------------------- compilation
_INTRINSICS = ("_popcount", "_low", "_high", "_prefetch")
_KERNELS = ("_hash", "_live", "_close", "_sc_find", "_assemble", "_assembles", "_tight_cost",
            "_needed", "_h_evicting", "_image", "_canonical", "_find", "_successors", "_insert",
            "_pop", "_buffers", "_step", "_pop_some", "_pop_batch", "_expand", "_unpop",
            "_insert_all", "_rehash", "_rehash_memo")
_state = {"built": None, "compile_seconds": None}


def _jit(function):
    """``numba.njit`` with the on-disk cache where some cache location is writable; in memory
    where none is (Numba refuses ``cache=True`` then, when the function is decorated)."""
    import numba

    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:                # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(function)


def available() -> bool:
    """Whether the compiled search can run: Numba imports. The kernels are made Numba functions
    on the first call (compiled on their first use)."""
    if _state["built"] is None:
        try:
            from numba.extending import intrinsic
        except ImportError:
            _state["built"] = False
            return False
        space = globals()
        for name in _INTRINSICS:
            space[name] = intrinsic(space[name])
        for name in _KERNELS:
            space[name] = _jit(space[name])
        _state["built"] = True
    return _state["built"]


def compile_seconds() -> float:
    """Make the kernels ready: compile them (or load them from Numba's cache) on the first call,
    by a search on a tiny graph; return the seconds that took (the same on later calls)."""
    if _state["compile_seconds"] is None:
        if not available():
            raise ImportError("the compiled pebbling search needs numba")
        from .graph import Graph

        started = time.perf_counter()
        # (compiling _step compiles every kernel it calls, whatever the graph)
        g = Graph([("a", "c"), ("b", "c"), ("a", "d"), ("c", "d"), ("b", "e"), ("d", "e"),
                   ("c", "e")])
        _search(_Search(g, 4), 10**6, None, False, started)
        _search(_Search(g, 4), 10**6, None, False, started, threads=2)
        arrays = _Arrays(64, 64)            # the kernels Python calls when tables grow
        _rehash(np.zeros_like(arrays.rec), arrays.rec, arrays.q_id, 0, arrays.ctr)
        memo = arrays.memo
        _rehash_memo(memo.m_key, memo.m_info, memo.m_key.copy(), memo.m_info.copy())
        _state["compile_seconds"] = time.perf_counter() - started
    return _state["compile_seconds"]


# -------------------------------------------------------------------------------- the driver
class _Memo:
    """The memo of ``assembles`` and the scratch table of its recursion (see the module
    docstring), grown by doubling; ``ctr`` holds their counters (the search's own counters,
    or an array of its own for a thread's memo)."""

    def __init__(self, ctr):
        self.m_key = np.zeros(1 << 10, np.uint64)
        self.m_info = np.zeros(1 << 10, np.uint8)
        self.sc_key = np.zeros(1 << 10, np.uint64)
        self.sc_stamp = np.zeros(1 << 10, np.int64)
        self.ctr = ctr

    def mem(self):
        return self.m_key, self.m_info, self.sc_key, self.sc_stamp, self.ctr

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.mem())

    def grow(self) -> None:
        ctr = self.ctr
        if ctr[_MEMO_FULL] or 2 * ctr[_MEMO_COUNT] > len(self.m_key):
            size = 2 * len(self.m_key)
            while 2 * ctr[_MEMO_COUNT] > size:
                size *= 2
            old_key, old_info = self.m_key, self.m_info
            self.m_key, self.m_info = np.zeros(size, np.uint64), np.zeros(size, np.uint8)
            _rehash_memo(self.m_key, self.m_info, old_key, old_info)
            ctr[_MEMO_FULL] = 0
        if ctr[_SC_FULL]:
            size = 2 * len(self.sc_key)
            self.sc_key, self.sc_stamp = np.zeros(size, np.uint64), np.zeros(size, np.int64)
            ctr[_SC_FULL] = 0


class _Arrays:
    """The search's arrays, grown by doubling."""

    def __init__(self, margin: int, f_range: int):
        size = 1 << max(8, (2 * margin).bit_length())
        self.rec = np.zeros(3 * _table_size(size), np.uint64)  # (red, blue, meta) per slot
        self.heads = np.full(f_range, -1, np.int32)         # the stacks' tops, one per f
        self.q_id = np.zeros(size, np.int32)
        self.q_g = np.zeros(size, np.int16)
        self.q_next = np.zeros(size, np.int32)
        self.ctr = np.zeros(_CTR, np.int64)
        self.memo = _Memo(self.ctr)
        self.seconds_per_byte = 0.0       # of the table's last growth

    def mem(self):
        return self.memo.mem()

    def nbytes(self) -> int:
        """Bytes of the records, table, queue and memo arrays (capacity, not use)."""
        return self.memo.nbytes() + sum(a.nbytes for a in (self.rec, self.heads, self.q_id,
                                                           self.q_g, self.q_next))

    def table_growth(self, margin: int) -> int:
        """The bytes of the table :meth:`grow` would make (0: it keeps the table)."""
        need = int(self.ctr[_COUNT]) + margin
        return 24 * _table_size(need) if 30 * need > 7 * len(self.rec) else 0

    def grow(self, margin: int) -> None:
        ctr = self.ctr
        count, qsize = int(ctr[_COUNT]), int(ctr[_QSIZE])
        need = count + margin
        if 30 * need > 7 * len(self.rec):
            started = time.perf_counter()
            size = _table_size(need)
            if size > 1 << 29:      # a record names its parent's slot in 30 bits (12 GiB)
                raise MemoryError(f"the search's table would need {size:,} slots")
            old, self.rec = self.rec, np.zeros(3 * size, np.uint64)
            _rehash(self.rec, old, self.q_id, int(ctr[_POOL]), ctr)
            del old
            self.seconds_per_byte = (time.perf_counter() - started) / (24 * size)
        if qsize + margin > len(self.q_id):
            size = len(self.q_id)
            while qsize + margin > size:
                size *= 2
            if size > 1 << 31:      # nodes are named by int32
                raise MemoryError(f"the search's queue would need {size:,} entries")
            used = int(ctr[_POOL])
            for name in ("q_id", "q_g", "q_next"):
                old = getattr(self, name)
                setattr(self, name, np.zeros(size, old.dtype))
                getattr(self, name)[:used] = old[:used]
        self.memo.grow()


def _table_size(records: int) -> int:
    """The least power of two with ``records`` at most 70% of it."""
    size = 1
    while 10 * records > 7 * size:
        size *= 2
    return size


def run(search: _Search, max_states: int, time_limit, progress, incumbent=None,
        threads: int = 1) -> Optimum:
    """The compiled counterpart of ``search.run(max_states, time_limit, progress, incumbent)``:
    with ``threads=1``, the same search, the same :class:`~ioattn.pebble.search.Optimum` (with
    ``engine="compiled"``) or :class:`~ioattn.pebble.search.SearchLimitError`; with more, the
    same optimum from a search in batches on that many threads (:func:`_threaded`). Needs
    :func:`available` and at most :data:`MAX_VERTICES` vertices.

    ``max_states`` is checked as the Python search checks it (by the threads: after each
    batch, which stops at the budget); the time limit about every tenth of a second (the
    Python search: every 1024 states; the threads: after each batch), and when the table must
    grow, which takes seconds once it holds millions of states: the search gives up then if
    growing it would end past the limit, at the speed of its last growth. The seconds exclude
    the one-off compilation (:func:`compile_seconds`)."""
    if search.n > MAX_VERTICES:
        raise ValueError(f"the compiled search takes at most {MAX_VERTICES} vertices, "
                         f"not {search.n}")
    threads = as_threads(threads)
    compile_seconds()
    return _search(search, max_states, time_limit, progress, time.perf_counter(), incumbent,
                   threads)


def _search(search: _Search, max_states: int, time_limit, progress, start,
            incumbent=None, threads: int = 1) -> Optimum:
    n, M = search.n, search.M
    u64 = np.uint64
    pm = np.array(search.pm, np.uint64)
    anc = np.array(search.anc, np.uint64)
    tight = np.array(search.tight, np.uint64).reshape(-1, 2)
    deep = np.array(search.deep, np.uint64).reshape(-1, 3)
    inp, out, related = u64(search.inp), u64(search.out), u64(search.tight_related)
    # the range of f = g + h: computing every vertex once, its operands read and itself
    # written, is a complete game of I/O at most U = n (max in-degree + 1) <= 64 * 64, so the
    # optimum, and the f (and g) of every state expanded, is at most U; a successor adds at
    # most 2 + n to g (a placement, a spill, the closure's writes), and h <= 3n (P and I are
    # disjoint sets of vertices, E counts at most 2 per vertex of a family). So f < U + 4n + 3
    # <= 4355, and g fits in 13 bits.
    f_range = n * (search.graph.max_in_degree + 1) + 4 * n + 3
    margin = 2 * n * M + 2
    arrays = _Arrays(margin, f_range)
    limit = incumbent[0] if incumbent is not None else 1 << 62

    ptab, itab = search.symmetry.tables, search.symmetry.inverse_tables
    if len(ptab) > 16:  # pragma: no cover - MAX_SYMMETRIES is 16
        raise ValueError("a record names one of at most 16 automorphisms")
    red0, blue0, g0 = search.close(0, search.inp)
    h0 = search.needed(red0, blue0)[0]
    cr, cb, k0 = search.symmetry.canonical(red0, blue0)
    start_slot = int(_hash(u64(cr), u64(cb))) % (len(arrays.rec) // 3)
    # no parent, nothing evicted
    arrays.rec[3 * start_slot:3 * start_slot + 3] = cr, cb, g0 | _NONE << 20 | k0 << 30
    ctr = arrays.ctr
    ctr[_COUNT] = 1
    ctr[_FREE] = -1
    arrays.q_id[0], arrays.q_g[0], arrays.q_next[0] = start_slot, g0, -1
    arrays.heads[g0 + h0] = 0
    ctr[_POOL] = ctr[_QSIZE] = 1
    ctr[_FMIN] = ctr[_LAST_F] = g0 + h0
    ctr[_PENDING] = -1

    kernel = (M, inp, out, related, pm, anc, tight, deep)
    clock = _Clock(n, M, max_states, time_limit, progress, start, arrays)
    try:
        if threads == 1:
            status = _serial(arrays, kernel, ptab, itab, limit, margin, clock)
        else:
            status = _threaded(arrays, kernel, ptab, itab, limit, margin, clock, threads)
    finally:
        clock.close()
    if status == _EMPTY:
        if incumbent is None:  # pragma: no cover - M >= max in-degree + 1 allows a game
            raise AssertionError("the search ran out of states without completing a game")
        # every state that might lead to a cheaper game was expanded: none does
        return search.proved(incumbent, int(ctr[_EXPANDED]), int(ctr[_COUNT]), h0, start,
                             engine="compiled", memory=clock.memory())

    # the path to the goal: (parent state, step) pairs from the start
    def reached(slot):                  # the state as its recorded step reached it
        k = int(arrays.rec[3 * slot + 2]) >> 30 & 15
        inverse = search.symmetry.inverse(k)
        return tuple(search.symmetry.image_by(inverse, int(arrays.rec[3 * slot + i]))
                     for i in (0, 1))

    chain = []
    s = int(ctr[_GOAL_AT])
    meta = int(arrays.rec[3 * s + 2])
    g = meta & int(_GMASK)
    while meta >> 34:
        p = (meta >> 34) - 1
        x, u, flags = meta >> 14 & 63, meta >> 20 & 127, meta >> 27 & 7
        chain.append((reached(p), (x, -1 if u == _NONE else u, flags & 1, flags >> 1 & 1)))
        meta = int(arrays.rec[3 * p + 2])
    chain.reverse()
    return search.result(chain, g, int(ctr[_EXPANDED]), int(ctr[_COUNT]), h0, start,
                         engine="compiled", memory=clock.memory())


class _Clock:
    """The checks between runs of the kernels: the state budget, the time limit (also before
    a table grows, which takes seconds once it holds millions of states) and the progress
    bar."""

    def __init__(self, n, M, max_states, time_limit, progress, start, arrays):
        self.n, self.M, self.max_states, self.time_limit = n, M, max_states, time_limit
        self.progress, self.start, self.arrays = progress, start, arrays
        self.bar = _progress_bar() if progress else None
        self.extra = 0                  # bytes of the threads' buffers and memos

    def memory(self) -> int:
        return self.arrays.nbytes() + self.extra

    def give_up(self):
        ctr = self.arrays.ctr
        return _limit_error(self.n, self.M, int(ctr[_EXPANDED]),
                            time.perf_counter() - self.start, int(ctr[_LAST_F]),
                            self.max_states, self.time_limit, generated=int(ctr[_COUNT]),
                            memory=self.memory())

    def grow(self, margin: int) -> None:
        """Grow the arrays for ``margin`` more states, unless the time limit has passed or
        would pass before the table is grown (at the speed of its last growth)."""
        arrays = self.arrays
        elapsed = time.perf_counter() - self.start
        if self.time_limit is not None and elapsed + arrays.seconds_per_byte * \
                arrays.table_growth(margin) > self.time_limit:
            raise self.give_up()
        arrays.grow(margin)

    def check(self) -> None:
        """Update the bar; give up past the budget or the time limit."""
        ctr = self.arrays.ctr
        expanded = int(ctr[_EXPANDED])
        elapsed = time.perf_counter() - self.start
        if self.bar is None and (self.progress or (self.progress is None
                                                   and elapsed > PROGRESS_AFTER)):
            self.bar = _progress_bar()
        if self.bar is not None:
            self.bar.update(expanded - self.bar.n)
            self.bar.set_postfix(f=int(ctr[_LAST_F]), refresh=False)
        if expanded >= self.max_states or (self.time_limit is not None
                                           and elapsed > self.time_limit):
            raise self.give_up()

    def close(self) -> None:
        if self.bar is not None:
            ctr = self.arrays.ctr
            self.bar.update(int(ctr[_EXPANDED]) - self.bar.n)
            self.bar.set_postfix(f=int(ctr[_LAST_F]), refresh=False)
            self.bar.close()


def _serial(arrays, kernel, ptab, itab, limit, margin, clock) -> int:
    """Run :func:`_step` to the goal (``_GOAL``) or the end of the queue (``_EMPTY``),
    returning to Python about every tenth of a second (as the Python search checks every 1024
    states) and when the arrays must grow."""
    ctr = arrays.ctr
    batch = 1024
    next_check = min(batch, clock.max_states)
    while True:
        called = time.perf_counter()
        status = _step(next_check, *kernel, arrays.mem(), arrays.rec, arrays.heads,
                       arrays.q_id, arrays.q_g, arrays.q_next, ptab, itab, limit)
        if ctr[_BAD_F]:  # pragma: no cover - excluded by the bound in _search
            raise AssertionError(f"f = {ctr[_BAD_F]} beyond the queue's range")
        if status in (_GOAL, _EMPTY):
            return status
        if status == _GROW:
            clock.grow(margin)
            continue
        if time.perf_counter() - called < 0.05 and batch < 1 << 22:
            batch *= 2
        next_check = min(next_check + batch, clock.max_states)
        clock.check()


#: The columns of a thread's buffers in :func:`_threaded` (80 bytes each), and the states a
#: thread expands per batch (fewer if their successors fill the buffers; the rest go back).
_COLUMNS = 1 << 17
_SHARE = 8192


def _threaded(arrays, kernel, ptab, itab, limit, margin, clock, threads) -> int:
    """A* in batches on ``threads`` threads: take a batch of states of the least ``f`` off the
    queue, list their successors on the threads side by side (:func:`_expand`, which only
    reads the table), then record and push them, one thread's after the other's
    (:func:`_insert_all`). Returns ``_GOAL`` or ``_EMPTY``.

    Exact as the serial search is: with ``h`` consistent, a state of the least ``f`` has its
    least cost ``g = f - h`` already, whichever of them is expanded first, so a batch of them
    can be expanded in any order; the rules that read a state's recorded step (6 and 7) hold
    for any step of least cost. The order differs from the serial search's, so the states
    expanded, and the optimal game found, may too; the optimum does not. Deterministic: each
    thread's share of a batch is fixed, and what it lists depends only on the table, which no
    thread changes."""
    from concurrent.futures import ThreadPoolExecutor

    ctr = arrays.ctr
    buffers = [_buffers(_COLUMNS) for _ in range(threads)]
    memos = [_Memo(np.zeros(_CTR, np.int64)) for _ in range(threads)]
    sids = np.empty(2 * _SHARE * threads, np.int64)      # (and room for their g)
    with ThreadPoolExecutor(threads) as pool:
        while True:
            clock.check()
            clock.grow(threads * _COLUMNS)
            for memo in memos:
                memo.grow()
            clock.extra = sum(a.nbytes for b in buffers for a in b) + \
                sum(memo.nbytes() for memo in memos)
            size = min(_SHARE * threads, clock.max_states - int(ctr[_EXPANDED]))
            m = _pop_batch(size, sids, kernel[2], arrays.rec, arrays.heads, arrays.q_id,
                           arrays.q_next, arrays.q_g, ctr)
            if m < 0:
                return _GOAL
            if m == 0:
                return _EMPTY
            f = int(ctr[_LAST_F])
            cuts = [m * t // threads for t in range(threads + 1)]
            jobs = [pool.submit(_expand, sids, cuts[t], cuts[t + 1], *kernel, memos[t].mem(),
                                arrays.rec, ptab, itab, limit, buffers[t][2], buffers[t][0],
                                buffers[t][1])
                    for t in range(threads)]
            listed = [job.result() for job in jobs]     # (all done before the table changes)
            for (_, k), (ub, ib, _) in zip(listed, buffers):
                _insert_all(k, ub, ib, arrays.rec, arrays.heads, arrays.q_id, arrays.q_g,
                            arrays.q_next, ctr)
            for t, (i, _) in enumerate(listed):
                if i < cuts[t + 1]:
                    _unpop(sids, i, cuts[t + 1], f, arrays.heads, arrays.q_id, arrays.q_g,
                           arrays.q_next, arrays.rec, ctr)
            if ctr[_BAD_F]:  # pragma: no cover - excluded by the bound in _search
                raise AssertionError(f"f = {ctr[_BAD_F]} beyond the queue's range")
