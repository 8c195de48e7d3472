"""From a backend's card-to-card links to one score per pair, and from pair scores to a set's score.

Backends report what they see (NVLink count and bandwidth from NVML, HCCS from DCMI, xGMI from KFD
``io_links``, MLU-Link ports from cndev, the PCIe relation from a common ancestor or sysfs) as
:class:`~hcs_deviceplugin.model.Link` values. The allocator reduces each card pair to one integer,
higher is better, so that every vendor is ranked by the same rules.

Weights (per pair)
    ``pair score = fabric + host path``

    * fabric: ``100`` for every direct accelerator link (NVLink, HCCS, xGMI, MLU-Link), times
      ``Link.count``. One such link carries about as much as a whole PCIe x16 path (NVLink 2-4:
      25 GB/s, HCCS 30-56 GB/s, xGMI 50 GB/s, MLU-Link 50 GB/s, per direction) and avoids the host
      altogether, so any fabric link outranks any PCIe relation, and more links mean proportionally
      more bandwidth.
    * host path: the best PCIe/CPU relation listed for the pair. ``PCIe-switch`` 50,
      ``PCIe-host-bridge`` 30, ``same-NUMA`` 20, ``cross-socket`` 10. With no host-path link listed
      it falls back to the cards' NUMA nodes: same node 20, different nodes 10, unknown 0. These
      are go-gpuallocator's PCIe weights (nvidia.md §3.9, with SINGLE and MULTIPLE switch merged
      into one kind), and NVLink at 100 per link is its NVLink weight too, so a node scores as
      NVIDIA's own plugin would score it; ROCm's allocator orders its kinds the same way
      (hygon.md §5). The host path also carries the NUMA and switch preference: a set inside one
      NUMA node never has a pair below 20 and a set behind one switch never one below 50.

Bandwidth
    ``Link.bandwidth_gbps`` is read as gigabytes per second per direction, summed over the link's
    ``count`` lanes. It is deliberately not scored: backends have filled it in different units, and
    within one node every link of a kind is the same generation, so ``count`` already says what the
    bandwidth would. Kind and count are what every backend can report reliably.

Set score
    A set's score is ``(bottleneck, total)``: its weakest pair first, then the sum over all its
    pairs. A collective (all-reduce, all-gather, all-to-all) over the set runs at the speed of its
    slowest hop: NCCL/HCCL rings and trees across a PCIe pair run at PCIe speed however many NVLinks
    the other pairs have, so the weakest pair is what a job sees. The sum breaks ties between sets
    with the same weakest pair in favour of the one with more strong pairs, which is where a
    library finds more rings or channels (e.g. a contiguous arc of an MLU-Link ring over a
    scattered choice). go-gpuallocator ranks by the sum alone, which happily takes three NVLinked
    cards plus one stranded across the socket; the bottleneck rules that out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Link, LinkKind

FABRIC_KINDS: frozenset[LinkKind] = frozenset(
    {LinkKind.NVLINK, LinkKind.HCCS, LinkKind.XGMI, LinkKind.MLU_LINK}
)
"""Direct accelerator-to-accelerator links: scored per link, on top of the host path."""

FABRIC_PER_LINK = 100
"""Score of one fabric link (times ``Link.count``)."""

HOST_PATH: dict[LinkKind, int] = {
    LinkKind.PCIE_SWITCH: 50,
    LinkKind.PCIE_HOST_BRIDGE: 30,
    LinkKind.SAME_NUMA: 20,
    LinkKind.CROSS_SOCKET: 10,
}
"""Score of the PCIe/CPU path between two cards; the best one listed for a pair counts."""

UNKNOWN_PATH = 0
"""Host path of a pair with no host-path link and no NUMA node known on both sides."""

SINGLE_CARD = 1_000_000_000
"""Bottleneck of a set with no pairs (one card): above any pair, so it never loses to a pair."""


def host_path_score(links: Iterable[Link], numa_a: int | None, numa_b: int | None) -> int:
    """The best listed PCIe/CPU relation, or the NUMA fallback when the backend listed none."""
    listed = [HOST_PATH[link.kind] for link in links if link.kind in HOST_PATH]
    if listed:
        return max(listed)
    if numa_a is None or numa_b is None:
        return UNKNOWN_PATH
    return HOST_PATH[LinkKind.SAME_NUMA] if numa_a == numa_b else HOST_PATH[LinkKind.CROSS_SOCKET]


def fabric_score(links: Iterable[Link]) -> int:
    """Every direct accelerator link counts, so two fabrics listed for one pair add up."""
    return sum(FABRIC_PER_LINK * max(link.count, 1) for link in links if link.kind in FABRIC_KINDS)


def pair_score(links: Sequence[Link], numa_a: int | None = None, numa_b: int | None = None) -> int:
    """One number per card pair (module docstring, "Weights"); higher is better."""
    return fabric_score(links) + host_path_score(links, numa_a, numa_b)


@field_repr
@dataclass(frozen=True, order=True, repr=False)
class SetScore:
    """What a collective over a set of cards sees: its weakest pair, then the sum of its pairs."""

    bottleneck: int
    total: int


def set_score(pair_scores: Iterable[int]) -> SetScore:
    """Score a set from the scores of all its pairs (none for a single card)."""
    scores = list(pair_scores)
    if not scores:
        return SetScore(SINGLE_CARD, 0)
    return SetScore(min(scores), sum(scores))
