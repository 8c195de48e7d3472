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


Part = tuple[int, int, tuple[int, ...]]
"""The best choice of some free cards inside one block: (sum of pair scores, leftover code, cards)."""


@field_repr
@dataclass(frozen=True, repr=False)
class Hierarchy:
    """The blocks of an ultrametric node; blocks ``0..n-1`` are the single cards, the last the root.

    ``tables`` and ``sums`` keep the knapsack tables of blocks with every card free and none
    must-include, per request count and protected sizes: they depend on nothing else, and on a
    node where a quarter of the cards are busy most switches and bridges, and many islands, are
    whole. At most :data:`_WHOLE_TABLES` are kept.
    """

    blocks: tuple[Block, ...]
    parents: tuple[int, ...] = ()
    tables: dict[tuple[int, int, tuple[int, ...]], dict[int, Part]] = field(
        default_factory=dict, compare=False, repr=False
    )
    sums: dict[tuple[int, int], list[int]] = field(default_factory=dict, compare=False, repr=False)

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
    return Hierarchy(
        tuple(
            Block(tuple(c), children[i], scores[i], parents[i], tuple(islands[i]))
            for i, c in enumerate(cards)
        ),
        tuple(parents),
    )


def _better(a: Part, b: Part) -> bool:
    """Higher sum, then higher leftover, then lower positions (the order of the key)."""
    if a[0] != b[0]:
        return a[0] > b[0]
    if a[1] != b[1]:
        return a[1] > b[1]
    return a[2] < b[2]


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

_WHOLE_TABLES = 4096
"""Most tables of whole blocks kept per topology before they are dropped and rebuilt."""
"""Bits per leftover entry in :meth:`Islands.code`: an entry's sum over a node stays far below 2**31."""


def solve(
    hierarchy: Hierarchy,
    fixed: Sequence[int],
    candidates: Sequence[int],
    count: int,
    islands: Islands,
) -> tuple[int, ...]:
    """The exact best ``count`` candidates to add to ``fixed`` (sorted positions); see module doc."""
    blocks = hierarchy.blocks
    parents = hierarchy.parents
    n_blocks = len(blocks)
    free = [0] * n_blocks
    held = [0] * n_blocks
    for counts, cards in ((free, candidates), (held, fixed)):
        for c in cards:
            b = c
            while b >= 0:
                counts[b] += 1
                b = parents[b]
    need_held = len(fixed)
    feasible = [held[i] == need_held and free[i] >= count for i in range(n_blocks)]
    deepest = [i for i in range(n_blocks) if feasible[i] and not any(feasible[k] for k in blocks[i].children)]
    if not deepest:
        return ()
    best_score = max(blocks[i].score for i in deepest)
    solver = _Knapsack(hierarchy, free, held, count, islands)
    strongest = [i for i in deepest if blocks[i].score == best_score]
    if len(strongest) > 1:  # the sums first, in plain integers: most blocks lose there already
        totals = {i: solver.totals(i)[count] for i in strongest}
        top = max(totals.values())
        strongest = [i for i in strongest if totals[i] == top]
    best: Part | None = None
    for i in strongest:
        part = solver.part(i)
        if part is None:
            continue
        leftover = part[1]
        up = blocks[i].parent
        while up >= 0 and islands.width:
            for level in blocks[up].islands:
                leftover += islands.code(level, free[up], len(blocks[up].cards), count)
            up = blocks[up].parent
        whole = (part[0], leftover, part[2])
        if best is None or _better(whole, best):
            best = whole
    return best[2] if best else ()


class _Knapsack:
    """Per block, the best :class:`Part` for each number of added cards (up to the request)."""

    def __init__(
        self, hierarchy: Hierarchy, free: Sequence[int], held: Sequence[int], count: int, islands: Islands
    ) -> None:
        self.blocks, self.free, self.held = hierarchy.blocks, free, held
        self.count, self.islands = count, islands
        self.tables, self.sums = hierarchy.tables, hierarchy.sums
        self.sizes = islands.sizes if islands.width else ()

    def part(self, block: int) -> Part | None:
        """The best part of exactly the request's count inside ``block`` (only that entry is built)."""
        if self._is_whole(block):
            return self._table(block).get(self.count)
        return self._build_table(block, exactly=self.count).get(self.count)

    def _is_whole(self, block: int) -> bool:
        return not self.held[block] and self.free[block] == len(self.blocks[block].cards)

    def _table(self, block: int) -> dict[int, Part]:
        if self._is_whole(block):
            key = (block, self.count, self.sizes)
            known = self.tables.get(key)
            if known is None:
                if len(self.tables) > _WHOLE_TABLES:
                    self.tables.clear()  # a bound, not a policy: requests of many sizes on one node
                known = self.tables[key] = self._build_table(block)
            return known
        return self._build_table(block)

    def _build_table(self, block: int, exactly: int | None = None) -> dict[int, Part]:
        """The block's table; with ``exactly``, only what can still add up to that many cards."""
        b = self.blocks[block]
        if not b.children:
            table: dict[int, Part] = {0: (0, 0, ())}
            if self.free[block]:
                table[1] = (0, 0, (block,))
            return table
        acc: dict[int, Part] = {0: (0, 0, ())}
        acc_held = 0
        limit = self.count
        kids = [k for k in b.children if self.free[k] or self.held[k]]  # the others add nothing
        later = sum(self.free[k] for k in kids)
        for kid in kids:
            sub = self._table(kid) if self.free[kid] else {0: (self._held_total(kid), 0, ())}
            kid_held = self.held[kid]
            later -= self.free[kid]
            lowest = -1 if exactly is None else exactly - later  # fewer cannot be filled up any more
            merged: dict[int, Part] = {}
            for c1, (t1, l1, k1) in acc.items():
                m1 = (c1 + acc_held) * b.score
                for c2, (t2, l2, k2) in sub.items():
                    c = c1 + c2
                    if c > limit or c < lowest:
                        continue
                    total = t1 + t2 + m1 * (c2 + kid_held)
                    left = l1 + l2
                    known = merged.get(c)
                    if known is not None:  # _better, inlined, before the cards are even merged
                        if total < known[0] or (total == known[0] and left < known[1]):
                            continue
                        cards = tuple(sorted(k1 + k2)) if k1 and k2 else k1 or k2
                        if total == known[0] and left == known[1] and cards >= known[2]:
                            continue
                    else:
                        cards = tuple(sorted(k1 + k2)) if k1 and k2 else k1 or k2
                    merged[c] = (total, left, cards)
            acc = merged
            acc_held += kid_held
        if self.islands.width and b.islands:
            size, free, code = len(b.cards), self.free[block], self.islands.code
            for c, (t, left, cards) in list(acc.items()):
                change = 0
                for level in b.islands:
                    change += code(level, free, size, c)
                acc[c] = (t, left + change, cards)
        return acc

    def totals(self, block: int) -> list[int]:
        """Only the best sum of pair scores per number of added cards (-1: impossible)."""
        if self._is_whole(block):
            known_sums = self.sums.get((block, self.count))
            if known_sums is None:
                if len(self.sums) > _WHOLE_TABLES:
                    self.sums.clear()
                known_sums = self.sums[block, self.count] = self._build_totals(block)
            return known_sums
        return self._build_totals(block)

    def _build_totals(self, block: int) -> list[int]:
        b = self.blocks[block]
        if not b.children:
            return [0, 0] if self.free[block] else [0]
        acc = [0]
        acc_held = 0
        for kid in b.children:
            if not self.free[kid] and not self.held[kid]:
                continue
            sub = self.totals(kid) if self.free[kid] else [self._held_total(kid)]
            kid_held = self.held[kid]
            width = min(self.count, len(acc) + len(sub) - 2) + 1
            merged = [-1] * width
            for c1, t1 in enumerate(acc):
                if t1 < 0:
                    continue
                m1 = (c1 + acc_held) * b.score
                for c2, t2 in enumerate(sub):
                    c = c1 + c2
                    if c >= width:
                        break
                    if t2 >= 0:
                        total = t1 + t2 + m1 * (c2 + kid_held)
                        if total > merged[c]:  # noqa: PLR1730 - max() costs a call in the hottest loop
                            merged[c] = total
            acc = merged
            acc_held += kid_held
        return acc

    def _held_total(self, block: int) -> int:
        """Pair scores among a block's must-include cards (the same in every answer, but counted)."""
        b = self.blocks[block]
        if not b.children:
            return 0
        total, seen = 0, 0
        for kid in b.children:
            h = self.held[kid]
            if h:
                total += self._held_total(kid) + b.score * seen * h
                seen += h
        return total
