"""Node labels: what accelerators this node has, on its Node object, for schedulers and job tools.

Off by default (``run --node-labels``; the chart's ``nodeLabels.enabled``): labelling needs a
cluster-scoped permission (patch Nodes), which a daemon that only serves kubelet should not hold.

The labels, computed by the pure :func:`node_labels` from the daemon's cards::

    hcs.deckhouse.io/<vendor>.present=true      every vendor with at least one card
    hcs.deckhouse.io/<vendor>.count=<n>         its Healthy cards (0 when all are sick)
    hcs.deckhouse.io/<vendor>.product=<model>   its most common model, as a label value
    gpu-type=<model>                            the most common model on the node

``gpu-type`` is the key job tools select on (``nodeSelector: {gpu-type: NVIDIA-H100-80GB-HBM3}``); the
key is configurable because clusters name it differently. Products and counts are what the node has,
not what pools hand out: pools change often and are per-team, the hardware does not.

:class:`NodeLabeler` keeps the Node in line, from a thread of its own, with four rules:

* **Own only our keys.** The daemon owns every label under its prefix and the ``gpu-type`` key, and
  nothing else: a patch sets the wanted labels and removes (JSON ``null``) owned ones no longer wanted,
  so a vendor whose cards are gone loses its labels, and labels others put on the Node are never
  touched. Labels are left in place when the daemon stops: a rolling update would otherwise make
  every node lose and regain them, and jobs selecting on them would stop scheduling meanwhile.
* **Quiet.** A patch is sent only when the labels differ from what the Node is known to carry. What
  it carries is read (GET) at the first round, after any failure, and every ``resync`` seconds, so
  that labels someone removed by hand come back; in between, the last patch is the truth.
* **Never in the way.** API failures are logged and retried at the next round, never raised; the
  daemon serves kubelet whether or not the apiserver is reachable. :meth:`NodeLabeler.stop` returns
  within its timeout even while a request hangs (requests have their own timeouts).
* **Prompt.** Rounds run every ``interval`` seconds and at once on :meth:`NodeLabeler.poke` (the
  runner pokes on every health transition, so ``count`` follows a failing card within a request).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from hcs_deviceplugin.kubeapi.paths import path_of
from hcs_deviceplugin.lazyre import LazyPattern
from hcs_deviceplugin.model import Card, Health
from hcs_deviceplugin.observability.labelkeys import (
    DEFAULT_GPU_TYPE_KEY,
    DEFAULT_LABEL_PREFIX,
    MAX_LABEL_VALUE,
    is_label_key,
)

if TYPE_CHECKING:
    from hcs_deviceplugin.kubeapi.client import KubeClient

__all__ = [
    "DEFAULT_GPU_TYPE_KEY",
    "DEFAULT_LABEL_PREFIX",
    "MAX_LABEL_VALUE",
    "CardsView",
    "NodeLabeler",
    "is_label_key",
    "label_value",
    "node_labels",
]

_LOG = logging.getLogger(__name__)

_SUFFIXES = (".present", ".count", ".product")
_MAX_VENDOR = MAX_LABEL_VALUE - max(map(len, _SUFFIXES))
"""A vendor name longer than this would make ``<vendor>.product`` an invalid key name."""
_REQUEST_TIMEOUT = (5.0, 10.0)
_PATCH_TYPE = "application/strategic-merge-patch+json"

_NOT_LABEL_CHARS = LazyPattern(r"[^A-Za-z0-9._-]+")
_UNTRIMMED = LazyPattern(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def label_value(text: str, limit: int = MAX_LABEL_VALUE) -> str:
    """``text`` as a valid label value: runs of other characters become ``-``, cut to ``limit``,
    alphanumeric at both ends; "" when nothing usable is left.

    ``NVIDIA H100 80GB HBM3`` → ``NVIDIA-H100-80GB-HBM3``, as NVIDIA's GPU feature discovery writes
    ``nvidia.com/gpu.product``, so selectors people already use keep working. Cutting comes before
    trimming so that a cut that ends on ``-`` still yields a valid value.
    """
    replaced = _NOT_LABEL_CHARS.sub("-", text)
    return _UNTRIMMED.sub("", replaced[:limit])


def _most_common(values: Iterable[str]) -> str:
    """The most frequent non-empty value; ties go to the alphabetically first, so labels are stable."""
    counts = Counter(v for v in values if v)
    if not counts:
        return ""
    return min(counts, key=lambda v: (-counts[v], v))


def node_labels(
    cards: Iterable[Card],
    prefix: str = DEFAULT_LABEL_PREFIX,
    gpu_type_key: str = DEFAULT_GPU_TYPE_KEY,
) -> dict[str, str]:
    """The labels the Node should carry for ``cards`` (see the module docstring); {} for no cards.

    Products are chosen among sanitised models, so two spellings that make the same label value count
    together; every card counts for the product, sick or not, so a failing card never relabels it.
    """
    by_vendor: dict[str, list[Card]] = {}
    for card in cards:
        vendor = label_value(card.vendor, _MAX_VENDOR)
        if vendor:
            by_vendor.setdefault(vendor, []).append(card)
    labels: dict[str, str] = {}
    for vendor, group in sorted(by_vendor.items()):
        labels[f"{prefix}{vendor}.present"] = "true"
        labels[f"{prefix}{vendor}.count"] = str(sum(c.health is Health.HEALTHY for c in group))
        product = _most_common(label_value(c.model) for c in group)
        if product:
            labels[f"{prefix}{vendor}.product"] = product
    gpu_type = _most_common(label_value(c.model) for group in by_vendor.values() for c in group)
    if gpu_type:
        labels[gpu_type_key] = gpu_type
    return labels


class CardsView(Protocol):
    """What the labeler reads: :class:`~hcs_deviceplugin.daemon.DaemonView` fits."""

    @property
    def cards(self) -> Sequence[Card]: ...


class _NodeApi:
    """The two calls the labeler makes; raise like the client (:class:`ApiError`, ``OSError``)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def labels(self, name: str) -> dict[str, str]:
        node = self._client.request("GET", path_of("api", "v1", "nodes", name), timeout=_REQUEST_TIMEOUT)
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        if not isinstance(labels, dict):
            raise ValueError(f"node {name}: metadata.labels is not an object")
        return {str(k): str(v) for k, v in labels.items()}

    def patch_labels(self, name: str, labels: Mapping[str, str | None]) -> None:
        self._client.request(
            "PATCH",
            path_of("api", "v1", "nodes", name),
            body={"metadata": {"labels": dict(labels)}},
            content_type=_PATCH_TYPE,
            timeout=_REQUEST_TIMEOUT,
        )


class NodeLabeler:
    """Keeps ``node_name``'s labels in line with ``view_fn().cards``; ``start``, ``poke``, ``stop``.

    ``api_client`` is the daemon's :class:`~hcs_deviceplugin.kubeapi.KubeClient`.

    ``label_prefix`` must be ``<DNS subdomain>/``, and ``gpu_type_key`` a valid label key: both are
    checked here, so a misconfiguration fails at start-up rather than as a 422 every round.
    """

    def __init__(
        self,
        api_client: KubeClient,
        node_name: str,
        view_fn: Callable[[], CardsView],
        interval: float = 30.0,
        label_prefix: str = DEFAULT_LABEL_PREFIX,
        *,
        gpu_type_key: str = DEFAULT_GPU_TYPE_KEY,
        resync: float = 600.0,
    ) -> None:
        if not label_prefix.endswith("/") or not is_label_key(label_prefix + "x"):
            raise ValueError(f"label prefix {label_prefix!r} is not a DNS subdomain followed by '/'")
        if not is_label_key(gpu_type_key):
            raise ValueError(f"{gpu_type_key!r} is not a valid label key")
        if interval <= 0:
            raise ValueError(f"interval must be positive, not {interval}")
        self._api = _NodeApi(api_client)
        self._node = node_name
        self._view_fn = view_fn
        self._interval = interval
        self._prefix = label_prefix
        self._gpu_type_key = gpu_type_key
        self._resync = resync
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._rounds = threading.Condition()
        self._started = 0
        self._completed = 0
        self._known: dict[str, str] | None = None  # owned labels the Node carries; None: read it
        self._known_at = 0.0
        self._thread: threading.Thread | None = None

    @property
    def applied(self) -> dict[str, str] | None:
        """The owned labels the Node is known to carry (None until read or after a failure)."""
        with self._rounds:
            return None if self._known is None else dict(self._known)

    def start(self) -> None:
        """Start the thread; its first round runs at once."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="node-labels", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Run a round now (cards or health changed); returns at once."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread; waits at most ``timeout`` (a hung request is left to its own timeout)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                _LOG.warning("node labeler still in a request after %.1fs; left to finish", timeout)

    def is_alive(self) -> bool:
        """Whether the thread runs (started and not stopped), for liveness checks and tests."""
        return self._thread is not None and self._thread.is_alive()

    def sync(self, timeout: float) -> bool:
        """Run a round that starts after this call and wait until it has finished; False on timeout.

        For a caller (and a test) that changed what the view shows and needs to know the Node has been
        brought in line with it: unlike :meth:`poke` followed by :meth:`wait_rounds`, a round already
        under way, which may have read the view before the change, does not count.
        """
        with self._rounds:
            target = self._started + 1
        self.poke()
        return self.wait_rounds(target, timeout)

    def wait_rounds(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` rounds have finished since start; False on timeout.

        Lets a caller (and a test) know a round ran and decided, even when it decided to send nothing.
        """
        with self._rounds:
            return self._rounds.wait_for(lambda: self._completed >= count, timeout)

    # --- the thread ----------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # before counting the round as started: see sync()
            with self._rounds:
                self._started += 1
            try:
                self._round()
            except Exception:
                _LOG.exception("node labels round failed unexpectedly; retrying next round")
            with self._rounds:
                self._completed += 1
                self._rounds.notify_all()
            self._wake.wait(self._interval)

    def _owned(self, key: str) -> bool:
        return key.startswith(self._prefix) or key == self._gpu_type_key

    def _round(self) -> None:
        wanted = node_labels(self._view_fn().cards, self._prefix, self._gpu_type_key)
        known = self._known
        if known is None or time.monotonic() - self._known_at >= self._resync:
            try:
                known = {k: v for k, v in self._api.labels(self._node).items() if self._owned(k)}
            except Exception as exc:
                self._forget()
                _log_failure("read", self._node, exc)
                return
            self._set_known(known)
        patch: dict[str, str | None] = {k: v for k, v in wanted.items() if known.get(k) != v}
        patch.update({k: None for k in known if k not in wanted})
        if not patch or self._stop.is_set():
            return
        try:
            self._api.patch_labels(self._node, patch)
        except Exception as exc:
            self._forget()  # the patch may or may not have applied: read the Node next round
            _log_failure("label", self._node, exc)
            return
        _LOG.info(
            "node %s labels: set %s; removed %s",
            self._node,
            ", ".join(f"{k}={v}" for k, v in sorted(patch.items()) if v is not None) or "none",
            ", ".join(sorted(k for k, v in patch.items() if v is None)) or "none",
        )
        with self._rounds:
            self._known = dict(wanted)  # _known_at unchanged: the resync clock counts from the read

    def _set_known(self, known: dict[str, str]) -> None:
        with self._rounds:
            self._known = known
            self._known_at = time.monotonic()

    def _forget(self) -> None:
        with self._rounds:
            self._known = None


def _log_failure(action: str, node: str, exc: BaseException) -> None:
    status = getattr(exc, "status", None)
    detail = (
        f"HTTP {status} {getattr(exc, 'reason', '')}".rstrip()
        if status is not None
        else f"{type(exc).__name__}: {exc}"
    )
    _LOG.warning("could not %s node %s (%s); retrying next round", action, node, detail)
