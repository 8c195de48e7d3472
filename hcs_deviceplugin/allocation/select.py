"""Choosing a set of cards: the objective, and the searches that find its best set.

The objective is one key per candidate set, compared as a tuple (higher is better, first difference
wins). Cards are topology positions (see :class:`~.topology.Topology`).

1. ``-load sum``, ``-load max``: replicas already held on the chosen cards (zero for whole cards).
   Time-sliced sharing is about spreading work; a busy card is worse than a less well-connected one.
2. ``-groups``, ``-modules``: ``linkGroup`` and ``linkModule`` values spanned, as few as possible.
   These are hardware rules a backend declares (an HCCS ring, a two-die module); they come before
   link quality so that a backend that knows its groups but cannot read pair links is still obeyed.
3. ``bottleneck``, ``total``: the set score of :mod:`.links`.
4. Fragmentation (whole-card pools only): what the request leaves free, see "Fragmentation" in
   :mod:`.topology`. Only its change is computed, which compares the same as the whole.
5. Ties: the lexicographically smallest sorted positions.

Search, in order:

* Load first (:func:`_settle_load`). Item 1 comes before everything, so every best set holds all
  candidates less loaded than the ``count``-th least loaded one, and the rest from those loaded
  exactly as much; the former are added up front and the search runs over the latter.
* Hierarchical nodes (every pair scored by the smallest block holding both cards, every island a
  block, no groups or modules declared): the exact tree programme of :mod:`.hierarchy`. Large
  NVLink-island nodes are built this way; it costs a few hundred small steps per request.
* Up to :data:`EXACT_CARDS` candidates, or at most :data:`EXHAUSTIVE_BUDGET` sets: branch and bound
  over sets in position order (:func:`exact`). It prunes only sets whose key is provably below the
  best found, so its answer is the one scoring every set would give.
* Beyond (irregular large nodes): greedy growth from one seed per island of every level, ranked by
  whether and how well the island holds the request (never by position), then single-card swaps
  and whole-island swaps on the best few (:func:`improved`). Never below the plain greedy's answer;
  not guaranteed optimal.
"""

from __future__ import annotations

import heapq
import math
import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import combinations

from hcs_deviceplugin.allocation import hierarchy
from hcs_deviceplugin.allocation.hierarchy import Islands
from hcs_deviceplugin.allocation.links import SINGLE_CARD
from hcs_deviceplugin.allocation.topology import Topology

EXHAUSTIVE_BUDGET = math.comb(12, 6)
"""Beyond :data:`EXACT_CARDS` candidates, the most sets the exact search is trusted with."""

EXACT_CARDS = 16
"""Up to this many candidates the exact branch and bound always runs (at most ``C(16, 8)`` sets)."""

GREEDY_WORK = 6_000
"""Rough number of candidate evaluations spent on greedy seeds (bounds latency on large nodes)."""

MIN_SEEDS, MAX_SEEDS = 4, 64
LOCAL_SEARCH_STARTS = 3

Key = tuple[int, ...]


@dataclass(frozen=True)
class CardRequest:
    """One card-level choice: add ``count`` of ``candidates`` to the ``fixed`` (must-include) cards.

    ``load`` is held units per position (empty: none). ``fragmentation`` says whether what stays
    free matters (whole-card pools); a time-sliced card stays usable after one of its replicas goes.
    """

    fixed: tuple[int, ...]
    candidates: tuple[int, ...]
    count: int
    load: tuple[int, ...] = ()
    fragmentation: bool = True


class Objective:
    """The key of :mod:`select` for one topology and one request, with per-request precomputation."""

    def __init__(self, topology: Topology, request: CardRequest) -> None:
        self.topology = topology
        self.request = request
        n = len(topology)
        self.load = list(request.load) if request.load else [0] * n
        fixed = sorted(set(request.fixed))
        self.fixed = fixed
        self.candidates = sorted(set(request.candidates) - set(fixed))
        self.fixed_groups = {topology.group[f] for f in fixed}
        self.fixed_modules = {topology.module[f] for f in fixed}
        self.fixed_load_sum = sum(self.load[f] for f in fixed)
        self.fixed_load_max = max((self.load[f] for f in fixed), default=0)
        wanted = len(fixed) + request.count
        self.sizes = tuple(sorted(set(topology.sizes) | ({wanted} if wanted > 1 else set()), reverse=True))
        self.islands = Islands(self.sizes, len(topology.levels), request.fragmentation)

    @cached_property
    def fixed_min(self) -> int:
        """The weakest pair among the fixed cards (the tree programme never needs this or the next
        three: they are computed on first use, by the searches that score sets one by one)."""
        pair, fixed = self.topology.pair, self.fixed
        return min((pair[a][b] for i, a in enumerate(fixed) for b in fixed[i + 1 :]), default=SINGLE_CARD)

    @cached_property
    def fixed_sum(self) -> int:
        pair, fixed = self.topology.pair, self.fixed
        return sum(pair[a][b] for i, a in enumerate(fixed) for b in fixed[i + 1 :])

    @cached_property
    def to_fixed_min(self) -> list[int]:
        """Per card, its weakest pair to the fixed cards."""
        out = [SINGLE_CARD] * len(self.topology)
        for f in self.fixed:  # row by row, in C: requests with many must-include (or settled) cards
            out = list(map(min, out, self.topology.pair[f]))
        return out

    @cached_property
    def to_fixed_sum(self) -> list[int]:
        """Per card, the sum of its pairs to the fixed cards."""
        out = [0] * len(self.topology)
        for f in self.fixed:
            out = list(map(operator.add, out, self.topology.pair[f]))
        return out

    @cached_property
    def free(self) -> list[list[int]]:
        """Free candidates per island, per level (only the leftover of the searches reads it)."""
        out = []
        for level in self.topology.levels:
            counts = [0] * (max(level) + 1)
            for c in self.candidates:
                counts[level[c]] += 1
            out.append(counts)
        return out

    def prefix(self, added: Sequence[int]) -> Key:
        """Load, groups, modules and set score (items 1-3) of ``fixed + added``."""
        pair = self.topology.pair
        bottleneck, total = self.fixed_min, self.fixed_sum
        load_sum, load_max = self.fixed_load_sum, self.fixed_load_max
        for i, a in enumerate(added):
            bottleneck = min(bottleneck, self.to_fixed_min[a])
            total += self.to_fixed_sum[a]
            load_sum += self.load[a]
            load_max = max(load_max, self.load[a])
            row = pair[a]
            for b in added[i + 1 :]:
                bottleneck = min(bottleneck, row[b])
                total += row[b]
        t = self.topology
        groups = len(self.fixed_groups | {t.group[a] for a in added}) if t.has_groups else 0
        modules = len(self.fixed_modules | {t.module[a] for a in added}) if t.has_modules else 0
        return (-load_sum, -load_max, -groups, -modules, bottleneck, total)

    def leftover(self, added: Sequence[int]) -> Key:
        """Item 4: usable sets lost per protected size and level, then partial islands made."""
        islands = self.islands
        if not islands.width:
            return ()
        out = [0] * islands.width
        for li, (level, free, sizes) in enumerate(
            zip(self.topology.levels, self.free, self.topology.island_sizes, strict=True)
        ):
            for i, k in Counter(level[a] for a in added).items():
                islands.add_change(out, li, free[i], sizes[i], k)
        return tuple(out)

    def key(self, added: Sequence[int]) -> Key:
        """The whole key (items 1-5) of adding ``added``."""
        ordered = sorted(added)
        return self.prefix(ordered) + self.leftover(ordered) + tuple(-p for p in ordered)

    def signature(self, x: int) -> tuple[int, ...]:
        """Everything the key knows about a card apart from its links: its island on each level."""
        t = self.topology
        return tuple(level[x] for level in t.levels)


def choose(topology: Topology, request: CardRequest) -> tuple[int, ...]:
    """The best ``count`` candidates to add (sorted positions); see the module doc for the search."""
    objective = Objective(topology, request)
    count = min(request.count, len(objective.candidates))
    if count <= 0:
        return ()
    settled, objective, count = _settle_load(objective, count)
    if count <= 0:
        return tuple(sorted(settled))
    return tuple(sorted([*settled, *_search(objective, count)]))


def _search(objective: Objective, count: int) -> tuple[int, ...]:
    t = objective.topology
    tree = t.hierarchy if not (t.has_groups or t.has_modules) else None
    if tree is not None:
        return hierarchy.solve(tree, objective.fixed, objective.candidates, count, objective.islands)
    n = len(objective.candidates)
    if n <= EXACT_CARDS or math.comb(n, count) <= EXHAUSTIVE_BUDGET:
        return exact(objective, count)
    return improved(objective, count)


def _settle_load(objective: Objective, count: int) -> tuple[list[int], Objective, int]:
    """Cards every best set holds because they are less loaded (item 1), and what is left to choose.

    The least load sum over ``count`` cards is that of the ``count`` least loaded ones: every card
    below the ``count``-th load is in every best set, and the rest come from cards at exactly that
    load; the load max is then fixed too. Whole-card pools (where fragmentation counts) carry no
    load and are returned unchanged.
    """
    load = objective.load
    cands = objective.candidates
    if objective.request.fragmentation or len({load[c] for c in cands}) <= 1:
        return [], objective, count
    cut = sorted(load[c] for c in cands)[count - 1]
    below = [c for c in cands if load[c] < cut]
    at = tuple(c for c in cands if load[c] == cut)
    fixed = tuple(sorted({*objective.fixed, *below}))
    reduced = replace(objective.request, fixed=fixed, candidates=at, count=count - len(below))
    return below, Objective(objective.topology, reduced), count - len(below)


def exact(objective: Objective, count: int) -> tuple[int, ...]:
    """The best set by branch and bound: the answer scoring every set would give, found sooner.

    Sets are visited in position order (so among sets of equal key the first is the lowest), and a
    branch is cut only when an upper bound of its key is below the best key found: groups and
    modules can only grow, the bottleneck only fall, and the sum rises by at most the best links
    to what is chosen plus the strongest pair for each pair still to come. Sets whose items 1-3 tie
    with the best are all kept; fragmentation and position decide among them at the end.
    """
    load = objective.load
    if len({load[c] for c in objective.candidates}) > 1:
        return _enumerate(objective, count)  # a loaded whole-card request: no caller makes one
    search = _BranchAndBound(objective, count)
    base = objective.prefix([])
    search.visit(0, count, base[4], base[5])
    tied = search.tied
    if not tied:  # cannot happen (the greedy set is among those visited); keep the greedy answer
        return tuple(sorted(_grow(objective, [], count, lookahead=True)))
    if len(tied) == 1 or not objective.islands.width:
        return tied[0]
    signature = {c: objective.signature(c) for c in objective.candidates}
    memo: dict[tuple[tuple[int, ...], ...], Key] = {}

    def leftover(combo: tuple[int, ...]) -> Key:
        sig = tuple(sorted(signature[c] for c in combo))
        if sig not in memo:
            memo[sig] = objective.leftover(combo)
        return memo[sig]

    return max(tied, key=leftover)


class _BranchAndBound:
    """The state of :func:`exact`: the set so far, each candidate's links to it, the best key."""

    def __init__(self, objective: Objective, count: int) -> None:
        t = objective.topology
        cands = objective.candidates
        self.topology, self.pair, self.cands, self.n = t, t.pair, cands, len(cands)
        self.min_to = [objective.to_fixed_min[c] for c in cands]
        self.sum_to = [objective.to_fixed_sum[c] for c in cands]
        self.strongest = max((t.pair[a][b] for i, a in enumerate(cands) for b in cands[i + 1 :]), default=0)
        self.constant = objective.prefix(cands[:count])[:2]
        self.groups: Counter[str] = Counter(t.group[f] for f in objective.fixed)
        self.modules: Counter[str] = Counter(t.module[f] for f in objective.fixed)
        self.best: Key = objective.prefix(sorted(_grow(objective, [], count, lookahead=True)))
        self.tied: list[tuple[int, ...]] = []
        self.chosen: list[int] = []

    def head(self, start: int, left: int) -> Key:
        """Items 1-2 of the best completion at most: an upper bound for every completion."""
        t = self.topology
        groups = -self._at_least(t.group, self.groups, start, left) if t.has_groups else 0
        modules = -self._at_least(t.module, self.modules, start, left) if t.has_modules else 0
        return (*self.constant, groups, modules)

    def _at_least(self, labels: Sequence[str], touched: Counter[str], start: int, left: int) -> int:
        """Islands of one hard level (groups or modules) the finished set spans at least.

        Those already touched, plus the fewest untouched ones whose candidates (from ``start`` on)
        hold the cards the touched ones cannot: largest first, which is exact for a count.
        """
        if not left:
            return len(touched)
        spare = 0
        others: Counter[str] = Counter()
        for c in self.cands[start:]:
            if labels[c] in touched:
                spare += 1
            else:
                others[labels[c]] += 1
        need, extra = left - spare, 0
        for size in sorted(others.values(), reverse=True):
            if need <= 0:
                break
            extra += 1
            need -= size
        return len(touched) + extra

    def visit(self, start: int, left: int, bottleneck: int, total: int) -> None:
        head = self.head(start, left)
        if left == 0:
            k = (*head, bottleneck, total)
            if k > self.best:
                self.best = k
                self.tied.clear()
            if k == self.best:
                self.tied.append(tuple(self.chosen))
            return
        min_to, sum_to = self.min_to, self.sum_to
        rest = sum(heapq.nlargest(left, sum_to[start:]))
        if (*head, bottleneck, total + rest + self.strongest * (left * (left - 1) // 2)) < self.best:
            return
        for j in range(start, self.n - left + 1):
            if head <= self.best[:4] and min_to[j] < self.best[4]:
                continue  # it would pull the weakest pair below the best, with nothing to gain first
            saved = min_to[j + 1 :], sum_to[j + 1 :]
            self._push(j)
            self.visit(j + 1, left - 1, min(bottleneck, min_to[j]), total + sum_to[j])
            self._pop(j, saved)

    def _push(self, j: int) -> None:
        x = self.cands[j]
        row, cands, min_to, sum_to = self.pair[x], self.cands, self.min_to, self.sum_to
        for i in range(j + 1, self.n):
            y = row[cands[i]]
            min_to[i] = min(min_to[i], y)
            sum_to[i] += y
        self.chosen.append(x)
        self.groups[self.topology.group[x]] += 1
        self.modules[self.topology.module[x]] += 1

    def _pop(self, j: int, saved: tuple[list[int], list[int]]) -> None:
        x = self.chosen.pop()
        for counter, label in (
            (self.groups, self.topology.group[x]),
            (self.modules, self.topology.module[x]),
        ):
            counter[label] -= 1
            if not counter[label]:
                del counter[label]
        self.min_to[j + 1 :], self.sum_to[j + 1 :] = saved


def _enumerate(objective: Objective, count: int) -> tuple[int, ...]:
    """Score every set (the reference the exact search must match)."""
    return max(combinations(objective.candidates, count), key=objective.key)


def greedy_baseline(objective: Objective, count: int) -> tuple[int, ...]:
    """Plain greedy from the must-include cards: add the best next card until ``count`` are added."""
    return tuple(sorted(_grow(objective, [], count)))


def improved(objective: Objective, count: int) -> tuple[int, ...]:
    """Greedy from many seeds, then single-card and whole-island swaps; never below the baseline."""
    results = {greedy_baseline(objective, count), tuple(sorted(_grow(objective, [], count, lookahead=True)))}
    for seed in _seeds(objective, count):
        results.add(tuple(sorted(_grow(objective, [seed], count, lookahead=True))))
    ranked = sorted(results, key=objective.key, reverse=True)
    repaired = [_repair(objective, list(r)) for r in ranked[:LOCAL_SEARCH_STARTS]]
    best = max((sorted(r) for r in repaired), key=objective.key)
    return tuple(sorted(_improve(objective, best)))


def _improve(objective: Objective, members: list[int]) -> list[int]:
    """Single-card swaps, then whole-island swaps, until neither improves the key."""
    current = _repair(objective, members)
    for _ in range(len(objective.topology.levels) * 2 + 2):
        swapped = _swap_islands(objective, current)
        if swapped is None:
            break
        current = _repair(objective, swapped)
    return current


def _islands(objective: Objective) -> list[tuple[int, list[int]]]:
    """Every island of every level with its free candidates, as (level, cards in position order)."""
    out: list[tuple[int, list[int]]] = []
    for li, level in enumerate(objective.topology.levels):
        members: dict[int, list[int]] = {}
        for c in objective.candidates:
            members.setdefault(level[c], []).append(c)
        out += [(li, cards) for cards in members.values()]
    return out


def _seeds(objective: Objective, count: int) -> list[int]:
    """Cards to grow from, most promising first, as many as the work budget allows.

    One seed per island of every level (``linkGroup``, fabric component, NUMA node, host bridge,
    switch, module), so the island a good answer lives in is seeded however many islands a large
    node has. Islands are ranked by what they can give, never by position: first those with enough
    free cards for the whole request (every one of them is seeded, budget or not), then by the link
    quality of their best card, then the tightest fit (fewest free cards beyond the request: the
    smallest island that holds it, and what is left stays whole). The seed of an island is its most
    strongly linked free card. Then, while the budget lasts, the cards with the strongest single
    link, where an irregular topology's best sets start.
    """
    budget = GREEDY_WORK // max(1, len(objective.candidates) * count)
    strongest = objective.topology.strongest
    ranked: list[tuple[tuple[int, ...], int]] = []
    for _, cards in _islands(objective):
        seed = min(cards, key=lambda c: (-strongest[c], c))
        fits = len(cards) >= count
        ranked.append(((int(fits), strongest[seed], -len(cards) if fits else len(cards), -seed), seed))
    fitting = sum(rank[0] for rank, _ in ranked)
    limit = max(MIN_SEEDS, min(MAX_SEEDS, max(budget, fitting)))
    seeds: list[int] = []
    for _, seed in sorted(ranked, reverse=True):
        if seed not in seeds:
            seeds.append(seed)
    seeds = seeds[:limit]
    if len(seeds) < limit:
        chosen = set(seeds)
        rest = sorted((c for c in objective.candidates if c not in chosen), key=lambda c: (-strongest[c], c))
        seeds += rest[: limit - len(seeds)]
    return seeds


def _swap_islands(objective: Objective, members: list[int]) -> list[int] | None:
    """The best set made by moving every card taken from one island to another island, if better.

    A single-card swap cannot move seven cards out of a broken island into a whole one: each step
    alone makes the set worse. This move replaces all of them at once (the cards in the new island
    grown greedily next to the rest of the set), on every island level.
    """
    current = sorted(members)
    current_key = objective.key(current)
    best_key, best_set = current_key, None
    body = len(current_key) - len(current)  # the key before its position tie-break
    levels = objective.topology.levels
    tried: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    for li, cards in _islands(objective):
        level = levels[li]
        island = level[cards[0]]
        for out_island in {level[m] for m in current}:
            if out_island == island:
                continue
            rest = [m for m in current if level[m] != out_island]
            moved = len(current) - len(rest)
            within = [c for c in cards if c not in rest]
            move = (tuple(rest), tuple(within))
            if len(within) < moved or move in tried:
                continue  # too small, or the same move on another level with the same cards
            tried.add(move)
            grown = sorted(_grow(objective, rest, len(current), lookahead=True, within=within))
            prefix = objective.prefix(grown)
            if prefix < best_key[: len(prefix)]:
                continue
            k = objective.key(grown)
            if k[:body] > current_key[:body] and k > best_key:  # positions alone: no move
                best_key, best_set = k, grown
    return best_set


def _grow(
    objective: Objective,
    start: list[int],
    count: int,
    lookahead: bool = False,
    within: Sequence[int] | None = None,
) -> list[int]:
    """Greedy: add the card that improves the prefix key most (lowest position on ties).

    ``within`` limits the cards added to those (an island swap grows inside one island).

    With ``lookahead`` the group and module terms count the groups/modules the set will need once
    grown to ``count`` cards (:class:`_Cover`), not those it spans so far. Without it the first die
    of a module looks as good as any other and two half modules end up where one whole module fits.
    """
    t = objective.topology
    pair, load = t.pair, objective.load
    members = list(start)
    base = objective.prefix(sorted(members))
    load_sum, load_max, bottleneck, total = -base[0], -base[1], base[4], base[5]
    pool = [c for c in (objective.candidates if within is None else within) if c not in members]
    covers = (
        _Cover(t.group, pool, objective.fixed_groups | {t.group[m] for m in members}, t.has_groups),
        _Cover(t.module, pool, objective.fixed_modules | {t.module[m] for m in members}, t.has_modules),
    )
    min_to = {x: min([objective.to_fixed_min[x], *(pair[x][m] for m in members)]) for x in pool}
    sum_to = {x: objective.to_fixed_sum[x] + sum(pair[x][m] for m in members) for x in pool}
    loaded = any(load)
    declared = t.has_groups or t.has_modules
    while len(members) < count and pool:
        remaining = count - len(members) - 1 if lookahead else 0
        best_x, best_k = pool[0], None
        for x in pool:  # only the terms that can differ, in key order (same order as the full key)
            b = min_to[x] if min_to[x] < bottleneck else bottleneck
            if declared:
                k: Key = (
                    -(load_sum + load[x]),
                    -max(load_max, load[x]),
                    -covers[0].spanned_after(x, remaining),
                    -covers[1].spanned_after(x, remaining),
                    b,
                    sum_to[x],
                )
            elif loaded:
                k = (-load[x], -max(load_max, load[x]), b, sum_to[x])
            else:
                k = (b, sum_to[x])
            if best_k is None or k > best_k:  # the first of equals: pool is in position order
                best_x, best_k = x, k
        members.append(best_x)
        pool.remove(best_x)
        load_sum += load[best_x]
        load_max = max(load_max, load[best_x])
        bottleneck = min(bottleneck, min_to[best_x])
        total += sum_to[best_x]
        for cover in covers:
            cover.add(best_x)
        row = pair[best_x]
        for x in pool:
            min_to[x] = min(min_to[x], row[x])
            sum_to[x] += row[x]
    return members


class _Cover:
    """Islands of one hard level (``linkGroup`` or ``linkModule``) a growing set spans, now or at least.

    ``spanned_after(x, remaining)`` is the number spanned after adding ``x``, plus the fewest further
    islands whose free cards cover the ``remaining`` cards that the touched islands cannot (largest
    islands first, which is exact for this count). A level where every card is its own island
    (no such attribute) is constant for a given size and scores 0, as in :meth:`Objective.prefix`.
    """

    def __init__(self, labels: Sequence[str], pool: Sequence[int], touched: set[str], active: bool) -> None:
        self.active = active
        self.labels = labels
        self.left: Counter[str] = Counter(labels[c] for c in pool)
        self.touched = set(touched)
        self.spare = sum(self.left[i] for i in self.touched)
        self.sizes: Counter[int] = Counter(v for i, v in self.left.items() if i not in self.touched)
        self._memo: dict[tuple[int, int | None], int] = {}

    def spanned_after(self, x: int, remaining: int) -> int:
        if not self.active:
            return 0
        island = self.labels[x]
        if island in self.touched:
            spanned, spare, own = len(self.touched), self.spare - 1, None
        else:
            spanned, spare, own = len(self.touched) + 1, self.spare + self.left[island] - 1, self.left[island]
        need = remaining - spare
        if need <= 0:
            return spanned
        key = (need, own)
        if key not in self._memo:
            self._memo[key] = self._islands_for(need, own)
        return spanned + self._memo[key]

    def _islands_for(self, need: int, own: int | None) -> int:
        islands = 0
        for size in sorted(self.sizes, reverse=True):
            available = self.sizes[size] - (1 if size == own else 0)
            if size <= 0 or available <= 0:
                continue
            take = min(available, -(-need // size))
            islands += take
            need -= take * size
            if need <= 0:
                break
        return islands

    def add(self, x: int) -> None:
        if not self.active:
            return
        island = self.labels[x]
        if island in self.touched:
            self.spare -= 1
        else:
            size = self.left[island]
            self.sizes[size] -= 1
            if not self.sizes[size]:
                del self.sizes[size]
            self.touched.add(island)
            self.spare += size - 1
        self.left[island] -= 1
        self._memo.clear()


def _repair(objective: Objective, members: list[int]) -> list[int]:
    """Best-improvement single swaps (one added card out, one free card in) until none improves.

    A swap must improve the key before its tie-break: walking to lower positions among equal sets
    would cost passes and buy nothing (the caller still picks the best by the whole key).
    """
    pair = objective.topology.pair
    current = sorted(members)
    current_key = objective.key(current)
    body = len(current_key) - len(current)
    for _ in range(2 * len(current) + 2):
        best_key, best_set = current_key, current
        outside = [c for c in objective.candidates if c not in current]
        to_members = {x: [pair[x][m] for m in current] for x in outside}
        without = {x: _all_but_one_min(values) for x, values in to_members.items()}
        sums = {x: sum(values) for x, values in to_members.items()}
        for j in range(len(current)):
            rest = current[:j] + current[j + 1 :]
            state = _PrefixState(objective, rest)
            leftovers: dict[tuple[int, ...], Key] = {}
            for x in outside:
                prefix = state.with_card(x, without[x][j], sums[x] - to_members[x][j])
                if prefix < best_key[: len(prefix)]:
                    continue
                candidate = sorted([*rest, x])
                sig = objective.signature(x)
                if sig not in leftovers:
                    leftovers[sig] = objective.leftover(candidate)
                k = prefix + leftovers[sig] + tuple(-p for p in candidate)
                if k[:body] > current_key[:body] and k > best_key:
                    best_key, best_set = k, candidate
        if best_set is current:
            return current
        current, current_key = best_set, best_key
    return current


def _all_but_one_min(values: Sequence[int]) -> list[int]:
    """``[min(values without values[j]) for j]`` in linear time (prefix and suffix minima)."""
    n = len(values)
    before, after = [SINGLE_CARD] * n, [SINGLE_CARD] * n
    for j in range(1, n):
        before[j] = min(before[j - 1], values[j - 1])
        after[n - 1 - j] = min(after[n - j], values[n - j])
    return [min(b, a) for b, a in zip(before, after, strict=True)]


class _PrefixState:
    """The prefix key of ``fixed + rest`` and what one more card would change, in O(1) per card."""

    def __init__(self, objective: Objective, rest: Sequence[int]) -> None:
        t = objective.topology
        self.objective = objective
        base = objective.prefix(sorted(rest))
        self.load_sum, self.load_max, self.bottleneck, self.total = -base[0], -base[1], base[4], base[5]
        self.groups = objective.fixed_groups | {t.group[m] for m in rest}
        self.modules = objective.fixed_modules | {t.module[m] for m in rest}
        self.use_groups, self.use_modules = t.has_groups, t.has_modules

    def with_card(self, x: int, min_to_rest: int, sum_to_rest: int) -> Key:
        """The prefix key with ``x`` added, given its weakest and summed pair scores to ``rest``."""
        o, t = self.objective, self.objective.topology
        load = o.load[x]
        return (
            -(self.load_sum + load),
            -max(self.load_max, load),
            -(len(self.groups) + (t.group[x] not in self.groups)) if self.use_groups else 0,
            -(len(self.modules) + (t.module[x] not in self.modules)) if self.use_modules else 0,
            min(self.bottleneck, o.to_fixed_min[x], min_to_rest),
            self.total + o.to_fixed_sum[x] + sum_to_rest,
        )
