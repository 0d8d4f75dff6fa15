import random


def pebble(edges, M):
    """Random depth-first orders from the outputs, each played with Belady's eviction (the red
    value needed furthest ahead goes, a clean one first); the best three are improved by
    swapping neighbours, and the best of them played with a lean towards evicting values
    already in slow memory."""
    g = _Dag(edges)
    rnd = random.Random(len(edges))
    tried = []
    for _ in range(200):
        order = g.dfs_order(rnd)
        tried.append((len(g.play(order, M)), order))
    tried.sort(key=lambda t: t[0])
    best_io, best_order = None, None
    for io, order in tried[:3]:
        io, order = _swaps(g, M, order, io, rnd, 1500)
        if best_io is None or io < best_io:
            best_io, best_order = io, order
    order = best_order
    spill = min(range(4), key=lambda b: (len(g.play(order, M, clean=b)), b))
    return g.play(order, M, moves=True, clean=spill)


def _swaps(g, M, order, io, rnd, steps):
    """Swap neighbours the graph lets swap; keep a swap unless the I/O grows."""
    for _ in range(steps):
        k = rnd.randrange(len(order) - 1)
        a, b = order[k], order[k + 1]
        if a in g.parents[b]:
            continue
        cand = order[:k] + [b, a] + order[k + 2:]
        new = len(g.play(cand, M))
        if new <= io:
            io, order = new, cand
    return io, order


class _Dag:
    def __init__(self, edges):
        self.parents, self.children = {}, {}
        for u, v in edges:
            self.parents.setdefault(v, []).append(u)
            self.children.setdefault(u, []).append(v)
            self.parents.setdefault(u, [])
            self.children.setdefault(v, [])
        self.inputs = {v for v, ps in self.parents.items() if not ps}
        self.outputs = [v for v, cs in self.children.items() if not cs]

    def dfs_order(self, rnd):
        seen, order = set(), []
        outs = list(self.outputs)
        rnd.shuffle(outs)

        def visit(v):
            if v in seen or v in self.inputs:
                return
            seen.add(v)
            ps = list(self.parents[v])
            rnd.shuffle(ps)
            for p in ps:
                visit(p)
            order.append(v)
        for o in outs:
            visit(o)
        return order

    def play(self, order, M, moves=False, clean=0):
        """The I/O moves of the game of ``order`` (all moves if ``moves``); a value already
        in slow memory counts as needed ``clean`` steps later than it is, when choosing what
        to evict (evicting it costs no write)."""
        uses = {v: [] for v in self.parents}
        for t, v in enumerate(order):
            for p in self.parents[v]:
                uses[p].append(t)
        nxt = {v: 0 for v in uses}
        red, blue, out, io = set(), set(self.inputs), [], []
        outputs = set(self.outputs)

        def next_use(u):
            k = nxt[u]
            return uses[u][k] if k < len(uses[u]) else 10 ** 9

        def make_room(keep):
            if len(red) < M:
                return
            victim = max((u for u in red if u not in keep),
                         key=lambda u: (next_use(u) + (clean if u in blue else 0), u in blue))
            if next_use(victim) < 10 ** 9 and victim not in blue:
                out.append(("write", victim))
                io.append(victim)
                blue.add(victim)
            red.discard(victim)
            out.append(("delete", victim))

        for v in order:
            ps = self.parents[v]
            for p in ps:
                if p not in red:
                    make_room(ps)
                    out.append(("read", p))
                    io.append(p)
                    red.add(p)
            make_room(ps)
            out.append(("compute", v))
            red.add(v)
            for p in ps:
                nxt[p] += 1
            for p in set(ps):
                if next_use(p) == 10 ** 9 and (p in blue or p not in outputs):
                    red.discard(p)
                    out.append(("delete", p))
            if v in outputs:
                out.append(("write", v))
                io.append(v)
                blue.add(v)
                if next_use(v) == 10 ** 9:
                    red.discard(v)
                    out.append(("delete", v))
        return out if moves else io
