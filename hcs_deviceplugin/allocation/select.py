"""Choosing a set of cards: the objective, an exact search for small inputs, greedy plus repair beyond.

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

Search. When the number of possible sets is at most :data:`EXHAUSTIVE_BUDGET` (``C(12, 6)`` = 924,
so any request over at most 12 free cards, and one card out of up to 924) every set is scored
and the answer is the exact optimum. Beyond that: greedy growth from several seeds (the plain
greedy from the must-include cards, plus seeds from the most promising islands and the most
strongly linked cards, as many as :data:`GREEDY_WORK` allows), then best-improvement single swaps
on the best few results. The plain greedy result is always among the candidates and swaps only ever
improve the key, so the answer is never worse than the plain greedy's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from hcs_deviceplugin.allocation.links import SINGLE_CARD
from hcs_deviceplugin.allocation.topology import Topology

EXHAUSTIVE_BUDGET = math.comb(12, 6)
"""Most candidate sets scored one by one; above it the greedy search runs."""

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
        pair = topology.pair
        fixed = sorted(set(request.fixed))
        self.fixed = fixed
        self.candidates = sorted(set(request.candidates) - set(fixed))
        self.fixed_min = min(
            (pair[a][b] for i, a in enumerate(fixed) for b in fixed[i + 1 :]), default=SINGLE_CARD
        )
        self.fixed_sum = sum(pair[a][b] for i, a in enumerate(fixed) for b in fixed[i + 1 :])
        self.to_fixed_min = [min((pair[x][f] for f in fixed), default=SINGLE_CARD) for x in range(n)]
        self.to_fixed_sum = [sum(pair[x][f] for f in fixed) for x in range(n)]
        self.fixed_groups = {topology.group[f] for f in fixed}
        self.fixed_modules = {topology.module[f] for f in fixed}
        self.fixed_load_sum = sum(self.load[f] for f in fixed)
        self.fixed_load_max = max((self.load[f] for f in fixed), default=0)
        self.free = [self._free_counts(level) for level in topology.levels]

    def _free_counts(self, level: Sequence[int]) -> list[int]:
        counts = [0] * (max(level) + 1)
        for c in self.candidates:
            counts[level[c]] += 1
        return counts

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
        """Item 4: the change in useful free capacity per size and level, then in partial islands."""
        if not self.request.fragmentation or not self.topology.levels:
            return ()
        taken = [Counter(level[a] for a in added) for level in self.topology.levels]
        caps: list[int] = []
        for s in self.topology.sizes:
            for free, counts in zip(self.free, taken, strict=True):
                caps.append(sum((free[i] - k) // s - free[i] // s for i, k in counts.items()))
        partial = 0
        for free, counts, sizes in zip(self.free, taken, self.topology.island_sizes, strict=True):
            for i, k in counts.items():
                partial += int(0 < free[i] - k < sizes[i]) - int(0 < free[i] < sizes[i])
        return (*caps, -partial)

    def key(self, added: Sequence[int]) -> Key:
        """The whole key (items 1-5) of adding ``added``."""
        ordered = sorted(added)
        return self.prefix(ordered) + self.leftover(ordered) + tuple(-p for p in ordered)

    def signature(self, x: int) -> tuple[int, ...]:
        """Everything the key knows about a card apart from its links: its island on each level."""
        t = self.topology
        return tuple(level[x] for level in t.levels)


def choose(topology: Topology, request: CardRequest) -> tuple[int, ...]:
    """The best ``count`` candidates to add (sorted positions): exact when small, greedy beyond."""
    objective = Objective(topology, request)
    count = min(request.count, len(objective.candidates))
    if count <= 0:
        return ()
    if math.comb(len(objective.candidates), count) <= EXHAUSTIVE_BUDGET:
        return exhaustive(objective, count)
    return improved(objective, count)


def exhaustive(objective: Objective, count: int) -> tuple[int, ...]:
    """Score every set; the first of the best in lexicographic order wins ties, as the key says."""
    best: Key | None = None
    tied: list[tuple[int, ...]] = []
    for combo in combinations(objective.candidates, count):
        k = objective.prefix(combo)
        if best is None or k > best:
            best, tied = k, [combo]
        elif k == best:
            tied.append(combo)
    if len(tied) == 1 or not objective.request.fragmentation:
        return tied[0]
    return max(tied, key=objective.leftover)


def greedy_baseline(objective: Objective, count: int) -> tuple[int, ...]:
    """Plain greedy from the must-include cards: add the best next card until ``count`` are added."""
    return tuple(sorted(_grow(objective, [], count)))


def improved(objective: Objective, count: int) -> tuple[int, ...]:
    """Greedy from several seeds, then single-swap repair of the best few; never below the baseline."""
    results = {greedy_baseline(objective, count), tuple(sorted(_grow(objective, [], count, lookahead=True)))}
    for seed in _seeds(objective, count):
        results.add(tuple(sorted(_grow(objective, [seed], count, lookahead=True))))
    ranked = sorted(results, key=objective.key, reverse=True)
    repaired = [_repair(objective, list(r)) for r in ranked[:LOCAL_SEARCH_STARTS]]
    return max((tuple(sorted(r)) for r in repaired), key=objective.key)


def _seeds(objective: Objective, count: int) -> list[int]:
    """Cards to grow from, most promising first, as many as the work budget allows.

    First one card per island signature, each signature probed with its own first ``count`` cards
    and scored by the full key: that ranks islands by link quality and by what taking from them
    leaves free, so the island a good answer lives in is seeded even on a large node (islands too
    small for the request come after, larger first). Then, while the budget lasts, the cards with
    the strongest single link, which is where an irregular topology's best sets start.
    """
    budget = GREEDY_WORK // max(1, len(objective.candidates) * count)
    limit = max(MIN_SEEDS, min(MAX_SEEDS, budget))
    members: dict[tuple[int, ...], list[int]] = {}
    for c in objective.candidates:
        members.setdefault(objective.signature(c), []).append(c)

    def promise(cards: list[int]) -> tuple[int, Key]:
        probe = cards[:count]
        if len(probe) == count:
            return (1, objective.key(probe))
        return (0, (len(cards), -cards[0]))

    seeds = [cards[0] for cards in sorted(members.values(), key=promise, reverse=True)][:limit]
    if len(seeds) < limit:
        strongest = objective.topology.strongest
        chosen = set(seeds)
        rest = sorted((c for c in objective.candidates if c not in chosen), key=lambda c: (-strongest[c], c))
        seeds += rest[: limit - len(seeds)]
    return seeds


def _grow(objective: Objective, start: list[int], count: int, lookahead: bool = False) -> list[int]:
    """Greedy: add the card that improves the prefix key most (lowest position on ties).

    With ``lookahead`` the group and module terms count the groups/modules the set will need once
    grown to ``count`` cards (:class:`_Cover`), not those it spans so far. Without it the first die
    of a module looks as good as any other and two half modules end up where one whole module fits.
    """
    t = objective.topology
    pair, load = t.pair, objective.load
    members = list(start)
    base = objective.prefix(sorted(members))
    load_sum, load_max, bottleneck, total = -base[0], -base[1], base[4], base[5]
    pool = [c for c in objective.candidates if c not in members]
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
