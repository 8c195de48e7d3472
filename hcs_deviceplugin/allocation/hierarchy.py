"""Exact choice on hierarchical nodes: a tree of blocks, one small dynamic programme per request.

Most large nodes are built in levels: GPUs behind a PCIe switch, switches behind a host bridge,
bridges in an NVLink island, islands on a NUMA node, NUMA nodes on the board. Their pair scores are
then *ultrametric*: the score of two cards depends only on the smallest block holding both, and it
rises strictly from the board down to a switch pair. :func:`build` recognises such a node once per
topology (O(cards²), in ``Topology.build``, kept on the topology) and returns the tree of blocks,
or ``None`` when the node is not built that way; then, and on nodes that declare ``linkGroup`` or
``linkModule`` (those terms come before links in the key), :mod:`.select` searches instead.

Why the tree makes the objective easy (see :mod:`.select` for the key):

* Bottleneck. A set inside block ``v`` that does not fit in one child of ``v`` has weakest pair
  exactly ``v``'s score. So the best bottleneck is that of the deepest blocks that can still hold
  the request (its must-include cards and enough free cards), and only those blocks need looking at.
* Total. Inside a block, the sum of pair scores is the children's sums plus ``v``'s score times the
  pairs across children, which depends only on how many cards each child gives: a knapsack over
  children, bottom up.
* Fragmentation. Every island of every level is required to be a block of the tree (else
  :func:`build` gives up), so what a choice leaves free adds up block by block too.
* Ties. Lower positions win; merging two per-child answers that are each the lowest for their count
  gives the lowest merged answer, so the knapsack keeps one answer per count.

How it stays cheap per request: an answer is one integer (see :class:`_Knapsack`) in which adding
answers adds their parts and comparing them compares the key, ties included; a block's table
depends only on its free and must-include cards, so tables are kept per topology by those
(:attr:`Hierarchy.tables`): on a node with a quarter of its cards busy each switch and bridge shows
only a handful of patterns, and most islands few more. The search for the deepest blocks that hold
the request walks down from the root and stops where they do.

Every step is exact, so the answer equals the exhaustive optimum of the same key (the property
tests compare it with an independent enumeration on 64-, 96- and 128-card nodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hcs_deviceplugin.allocation.links import SINGLE_CARD
from hcs_deviceplugin.fieldrepr import field_repr


@field_repr
@dataclass(frozen=True, repr=False)
class Block:
    """One block of the tree: its cards (positions), children (block numbers) and pair score.

    ``score`` is the score of every pair of cards that lie in different children; a single card's
    block has :data:`~.links.SINGLE_CARD`. ``islands`` lists the island levels (indices into
    ``Topology.levels``) on which this block is an island.
    """

    cards: tuple[int, ...]
    children: tuple[int, ...]
    score: int
    parent: int
    islands: tuple[int, ...]


Table = tuple[int | None, ...]
"""A block's best answers by number of added cards, each one integer (see :class:`_Knapsack`);
None where a table built for an exact count skips counts that cannot reach it. A tuple of ints,
which the cyclic garbage collector stops tracking after one pass: a topology keeps thousands."""


@field_repr
@dataclass(frozen=True, repr=False)
class Hierarchy:
    """The blocks of an ultrametric node; blocks ``0..n-1`` are the single cards, the last the root.

    ``masks`` holds each block's cards as a bit mask (bit ``p`` for position ``p``), so a request
    finds a block's free and must-include cards with one ``&``. ``shapes`` and ``offsets`` say
    which blocks are built alike and where each starts (see :func:`_shapes`). ``tables`` keeps
    knapsack tables by protected sizes, shape, and the block's free and must-include cards from its
    start, each with the start of the block it was built for: a table depends on nothing else (a
    request's count only cuts it short, so a longer table serves a smaller count). ``tops`` keeps
    the answers of deepest blocks, built for one count, by that count too. ``codes`` keeps
    leftover changes the same way. All are bounded (:data:`_TABLES`); gRPC threads share them (a
    dict store is atomic, and a table dropped under a reader is only built again).
    """

    blocks: tuple[Block, ...]
    parents: tuple[int, ...] = ()
    masks: tuple[int, ...] = ()
    shapes: tuple[int, ...] = ()
    offsets: tuple[int, ...] = ()
    tables: dict[tuple[tuple[int, ...], int, int, int], tuple[int, Table]] = field(
        default_factory=dict, compare=False, repr=False
    )
    tops: dict[tuple[tuple[int, ...], int, int, int, int], tuple[int, int | None]] = field(
        default_factory=dict, compare=False, repr=False
    )
    codes: dict[tuple[tuple[int, ...], tuple[int, ...], int, int, int], int] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def root(self) -> int:
        return len(self.blocks) - 1


def build(pair: Sequence[Sequence[int]], levels: Sequence[Sequence[int]]) -> Hierarchy | None:
    """The tree of blocks when the pair scores are ultrametric and every island is a block, else None.

    Blocks are merged like single-linkage clustering (strongest pairs first, union-find); blocks
    joined at one score form one block. The node is ultrametric exactly when, at every merge, every
    pair across the merged blocks has that score: counted, not assumed.
    """
    n = len(pair)
    if n == 0:
        return None
    by_score: dict[int, list[tuple[int, int]]] = {}
    for a in range(n):
        row = pair[a]
        for b in range(a + 1, n):
            by_score.setdefault(row[b], []).append((a, b))
    parent = list(range(n))
    block_of = list(range(n))  # union-find root -> block number
    cards: list[list[int]] = [[a] for a in range(n)]
    children: list[tuple[int, ...]] = [() for _ in range(n)]
    scores = [SINGLE_CARD] * n

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for score in sorted(by_score, reverse=True):
        edges = by_score[score]
        roots = {find(a) for edge in edges for a in edge}
        joined = {r: r for r in roots}
        cross = 0
        for a, b in edges:
            ra, rb = find(a), find(b)
            if ra == rb:
                return None  # a weaker pair inside a block that is already joined more strongly
            cross += 1
            ta, tb = _top(joined, ra), _top(joined, rb)
            if ta != tb:
                joined[max(ta, tb)] = min(ta, tb)
        groups: dict[int, list[int]] = {}
        for r in roots:
            groups.setdefault(_top(joined, r), []).append(r)
        expected = 0
        for members in groups.values():
            sizes = [len(cards[block_of[r]]) for r in members]
            expected += (sum(sizes) ** 2 - sum(s * s for s in sizes)) // 2
        if cross != expected:
            return None  # some pair across the merged blocks scores lower: not ultrametric
        for members in groups.values():
            members.sort(key=lambda r: min(cards[block_of[r]]))
            kids = tuple(block_of[r] for r in members)
            merged = sorted(c for k in kids for c in cards[k])
            cards.append(merged)
            children.append(kids)
            scores.append(score)
            head = members[0]
            for r in members[1:]:
                parent[r] = head
            block_of[head] = len(cards) - 1
    return _blocks(cards, children, scores, levels)


def _top(joined: dict[int, int], x: int) -> int:
    """Union-find root among the blocks merged at one score."""
    while joined[x] != x:
        joined[x] = joined[joined[x]]
        x = joined[x]
    return x


def _blocks(
    cards: list[list[int]],
    children: list[tuple[int, ...]],
    scores: list[int],
    levels: Sequence[Sequence[int]],
) -> Hierarchy | None:
    index = {tuple(c): i for i, c in enumerate(cards)}
    islands: list[list[int]] = [[] for _ in cards]
    for li, level in enumerate(levels):
        members: dict[int, list[int]] = {}
        for card, island in enumerate(level):
            members.setdefault(island, []).append(card)
        for group in members.values():
            if len(group) < 2:
                continue
            block = index.get(tuple(group))
            if block is None:
                return None  # an island that is not a block: leftovers would not add up per block
            islands[block].append(li)
    parents = [-1] * len(cards)
    for i, kids in enumerate(children):
        for k in kids:
            parents[k] = i
    blocks = tuple(
        Block(tuple(c), children[i], scores[i], parents[i], tuple(islands[i])) for i, c in enumerate(cards)
    )
    shapes, offsets = _shapes(blocks)
    return Hierarchy(blocks, tuple(parents), tuple(sum(1 << p for p in c) for c in cards), shapes, offsets)


def _shapes(blocks: Sequence[Block]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per block, a number shared by the blocks built alike, and the position it starts at.

    Two blocks are alike when their cards are consecutive positions and, from their first card on,
    they have the same score, the same island levels and alike children at the same places: then
    the table of one, moved by the distance between their first cards, is the table of the other
    with the same free and must-include cards relative to that first card. Every island of a node
    built in levels is alike, and so is every bridge and switch, so a pattern seen in one serves
    all. A block whose cards are not consecutive is alike only to itself and starts at 0 (no move).
    """
    known: dict[tuple[object, ...], int] = {}
    shapes: list[int] = []
    offsets: list[int] = []
    for i, b in enumerate(blocks):  # children come before their parents
        first = b.cards[0]
        if b.cards == tuple(range(first, first + len(b.cards))):
            kids = tuple((blocks[k].cards[0] - first, shapes[k]) for k in b.children)
            signature: tuple[object, ...] = (b.score, b.islands, len(b.cards), kids)
        else:
            signature, first = ("block", i), 0
        shapes.append(known.setdefault(signature, len(known)))
        offsets.append(first)
    return tuple(shapes), tuple(offsets)


class Islands:
    """What taking ``k`` cards from one island changes in the leftover key (see ``Objective``).

    :meth:`add_change` fills the key's vector. :meth:`code` gives the same change as one integer,
    each entry a digit of a large base (:data:`_DIGIT` bits, an entry never comes near it), so
    that adding and comparing codes is adding and comparing vectors, at the cost of one integer
    operation: the tree programme adds leftovers at every step.
    """

    def __init__(self, sizes: Sequence[int], level_count: int, fragmentation: bool) -> None:
        self.sizes = tuple(sizes)
        self.level_count = level_count
        self.width = len(self.sizes) * level_count + 1 if fragmentation and level_count else 0
        self._codes: dict[tuple[int, int, int, int], int] = {}

    def change(self, level: int, free: int, size: int, taken: int) -> list[int]:
        """Per entry of the leftover key: usable sets lost per size, then the partial-island change."""
        out = [0] * self.width
        self.add_change(out, level, free, size, taken)
        return out

    def add_change(self, out: list[int], level: int, free: int, size: int, taken: int) -> None:
        """Add :meth:`change` into ``out`` in place (the hot path of ``Objective.leftover``)."""
        if not self.width or not taken:
            return
        left = free - taken
        step = self.level_count
        for i, s in enumerate(self.sizes):
            out[i * step + level] += left // s - free // s
        out[-1] += int(0 < free < size) - int(0 < left < size)

    def code(self, level: int, free: int, size: int, taken: int) -> int:
        """:meth:`change` as one integer (see class doc); 0 when nothing is taken."""
        if not self.width or not taken:
            return 0
        key = (level, free, size, taken)
        known = self._codes.get(key)
        if known is None:
            known = 0
            for entry in self.change(level, free, size, taken):
                known = (known << _DIGIT) + entry
            self._codes[key] = known
        return known


_DIGIT = 32
"""Bits per leftover entry in :meth:`Islands.code`: an entry's sum over a node stays far below 2**31."""

_WARM_CARDS = 8
"""Blocks of up to this many cards get the tables of all their free patterns ahead (:func:`warm`)."""

_WARM_TABLES = 1024
"""Most tables :func:`warm` builds per topology (a quarter of :data:`_TABLES`)."""

_TABLES = 4096
"""Most tables (and answers, and leftover codes) kept per topology before they are dropped and
rebuilt: a bound on memory (a table holds one integer of about a thousand bits per count on a
128-card node), not a policy."""


def warm(hierarchy: Hierarchy, variants: Sequence[Islands]) -> None:
    """Build, once per topology, the tables of every free pattern of its small blocks.

    A pool's first requests would otherwise build them one by one, and those first requests are
    what the p99 of a pool's latency measures. Every shape of at most :data:`_WARM_CARDS` cards
    (below the root) with nothing must-include, per variant (whole-card and shared pools protect
    different leftovers), children before parents (so each build merges kept tables), up to
    :data:`_WARM_TABLES` tables: on a node built in levels that is every switch, bridge and island
    pattern, 546 tables, about 8 ms once.
    """
    budget = _WARM_TABLES
    for islands in variants:
        done: set[int] = set()
        for block, b in enumerate(hierarchy.blocks):  # children come before their parents
            size, shape = len(b.cards), hierarchy.shapes[block]
            patterns = (1 << size) - 1
            if not b.children or block == hierarchy.root or size > _WARM_CARDS or shape in done:
                continue
            if patterns > budget:
                return
            done.add(shape)
            budget -= patterns
            solver = _Knapsack(hierarchy, size, islands)
            for pattern in range(1, patterns + 1):
                solver.table(block, sum(1 << c for j, c in enumerate(b.cards) if pattern >> j & 1), 0)


def solve(
    hierarchy: Hierarchy,
    fixed: Sequence[int],
    candidates: Sequence[int],
    count: int,
    islands: Islands,
) -> tuple[int, ...]:
    """The exact best ``count`` candidates to add to ``fixed`` (sorted positions); see module doc.

    ``candidates`` exclude ``fixed``, as :class:`~.select.Objective` keeps them.
    The deepest blocks that hold the request are found from the root down: a block holds it only
    if its parent does, so only those blocks and their children are looked at.
    """
    blocks, masks = hierarchy.blocks, hierarchy.masks
    free_mask = held_mask = 0
    for c in candidates:
        free_mask |= 1 << c
    for f in fixed:
        held_mask |= 1 << f

    root = masks[hierarchy.root]
    if held_mask & root != held_mask or (free_mask & root).bit_count() < count:
        return ()
    deepest: list[int] = []
    stack = [hierarchy.root]
    while stack:
        block = stack.pop()
        inner = [
            k
            for k in blocks[block].children
            if held_mask & masks[k] == held_mask and (free_mask & masks[k]).bit_count() >= count
        ]
        if inner:
            stack += inner
        else:
            deepest.append(block)
    best_score = max(blocks[b].score for b in deepest)
    solver = _Knapsack(hierarchy, count, islands)
    best: int | None = None
    for block in sorted(deepest):
        if blocks[block].score != best_score:
            continue
        mask = masks[block]
        key = solver.top(block, free_mask & mask, held_mask & mask)
        if key is None:
            continue
        up = blocks[block].parent
        while up >= 0 and islands.width:
            if blocks[up].islands:
                free_up = (free_mask & masks[up]).bit_count()
                key += solver.code(blocks[up].islands, free_up, len(blocks[up].cards), count)
            up = blocks[up].parent
        if best is None or key > best:
            best = key
    return () if best is None else solver.cards_of(best)


class _Knapsack:
    """Per block, the best answer for each number of added cards (up to the request), as one int.

    An answer packs (sum of pair scores, leftover code, cards) as
    ``total << total_shift | leftover << cards | mask``, bit ``cards - 1 - p`` of ``mask`` standing
    for position ``p``. Between answers with the same number of cards, the larger integer is the
    better answer: the higher sum, then the higher leftover (a signed code, narrower than its
    field), then the lower positions (the lowest position that one set holds and the other does not
    is the highest differing bit). Answers on disjoint cards add field by field, so merging two
    children is one integer addition plus the pairs across them.
    """

    def __init__(self, hierarchy: Hierarchy, count: int, islands: Islands) -> None:
        self.blocks, self.masks = hierarchy.blocks, hierarchy.masks
        self.shapes, self.offsets = hierarchy.shapes, hierarchy.offsets
        self.count, self.islands = count, islands
        self.cards = len(hierarchy.blocks[hierarchy.root].cards)
        self.total_shift = self.cards + _DIGIT * islands.width + 2
        sizes = islands.sizes if islands.width else ()
        self.shape = (islands.width, *sizes)
        self.tables, self.tops, self.codes = hierarchy.tables, hierarchy.tops, hierarchy.codes

    def top(self, block: int, free: int, held: int) -> int | None:
        """The best answer of exactly the request's count in a deepest block, kept like tables.

        Its table is built only as far as that count needs, so the answer is kept by the count
        too; a node's whole islands (one pattern, every request) are the common case.
        """
        count = self.count
        if block < self.cards:
            table = self.table(block, free, held)
            return table[count] if len(table) > count else None
        start = self.offsets[block]
        key = (self.shape, count, self.shapes[block], free >> start, held >> start)
        kept = self.tops.get(key)
        if kept is None:
            table = self._build(block, free, held, exactly=count)
            answer = table[count] if len(table) > count else None
            if len(self.tops) >= _TABLES:
                self.tops.clear()
            self.tops[key] = (start, answer)
            return answer
        built_at, answer = kept
        if answer is None or built_at == start:
            return answer
        return self._moved((answer,), start - built_at)[0]

    def table(self, block: int, free: int, held: int) -> Table:
        """The whole table of ``block`` with the ``free`` and ``held`` cards (masks), kept."""
        if block < self.cards:  # a single card
            return (0, 1 << (self.cards - 1 - block)) if free else (0,)
        start = self.offsets[block]
        key = (self.shape, self.shapes[block], free >> start, held >> start)
        kept = self.tables.get(key)
        if kept is None or (len(kept[1]) <= self.count and len(kept[1]) <= free.bit_count()):  # too short
            table = self._build(block, free, held, exactly=None)
            if len(self.tables) >= _TABLES:  # after the build: it keeps its children's tables
                self.tables.clear()
            self.tables[key] = (start, table)
            return table
        built_at, table = kept
        if built_at == start:
            return table
        return self._moved(table, start - built_at)

    def _moved(self, table: Table, distance: int) -> Table:
        """A table of a block alike, for the block ``distance`` positions further on (see
        :func:`_shapes`): only the cards change, each bit ``distance`` lower."""
        low = (1 << self.cards) - 1
        out: list[int | None] = []
        for key in table:
            if key is None:
                out.append(None)
                continue
            mask = key & low
            out.append(key - mask + (mask >> distance if distance > 0 else mask << -distance))
        return tuple(out)

    def _build(self, block: int, free: int, held: int, exactly: int | None) -> Table:
        """Merge the children's tables; with ``exactly``, keep only what can still reach that count."""
        b, masks = self.blocks[block], self.masks
        kids: list[tuple[int, int, int, int, int]] = []
        later = 0
        for kid in b.children:
            kid_free, kid_held = free & masks[kid], held & masks[kid]
            if kid_free or kid_held:  # the others add nothing
                n_free = kid_free.bit_count()
                kids.append((kid, kid_free, kid_held, n_free, kid_held.bit_count()))
                later += n_free
        score = b.score << self.total_shift
        limit = self.count
        acc: list[int | None] = [0]
        acc_held = 0
        for kid, kid_free, kid_held, n_free, n_held in kids:
            sub = self.table(kid, kid_free, kid_held)  # whole: no None entries
            later -= n_free
            lowest = 0 if exactly is None else exactly - later  # fewer cannot be filled up any more
            width = min(limit, len(acc) + len(sub) - 2) + 1
            merged: list[int | None] = [None] * width
            for c1, k1 in enumerate(acc):
                if k1 is None:
                    continue
                cross = (c1 + acc_held) * score  # each card so far pairs with each card of the kid
                base = k1 + cross * n_held
                for c2 in range(max(0, lowest - c1), min(len(sub), width - c1)):
                    value = base + sub[c2] + cross * c2  # type: ignore[operator]
                    known = merged[c1 + c2]
                    if known is None or value > known:
                        merged[c1 + c2] = value
            acc = merged
            acc_held += n_held
        if self.islands.width and b.islands:
            n_free, size = free.bit_count(), len(b.cards)
            for c in range(1, len(acc)):
                entry = acc[c]
                if entry is not None:
                    acc[c] = entry + self.code(b.islands, n_free, size, c)
        return tuple(acc)

    def code(self, levels: tuple[int, ...], free: int, size: int, taken: int) -> int:
        """The leftover change of taking ``taken`` of ``free`` cards from an island on ``levels``."""
        key = (self.shape, levels, free, size, taken)
        known = self.codes.get(key)
        if known is None:
            known = sum(self.islands.code(level, free, size, taken) for level in levels) << self.cards
            if len(self.codes) >= _TABLES:
                self.codes.clear()
            self.codes[key] = known
        return known

    def cards_of(self, key: int) -> tuple[int, ...]:
        """The positions an answer holds, in order."""
        mask = key & ((1 << self.cards) - 1)
        out: list[int] = []
        while mask:
            high = mask.bit_length() - 1
            out.append(self.cards - 1 - high)
            mask ^= 1 << high
        return tuple(out)
