"""The Prometheus text exposition format 0.0.4: metric families in, the ``/metrics`` body out.

Our own, so that a running daemon does not import prometheus-client: its package imports an HTTP
server, wsgiref, ssl, email and more on the way (about 12 MiB of resident memory and tens of
milliseconds of start-up) for the few hundred lines we need. The output is what prometheus-client's
``generate_latest`` wrote for the same families, byte for byte (the tests compare the two): ``# HELP``
and ``# TYPE`` lines, labels sorted by name, label values escaped (backslash, double quote, newline),
help escaped (backslash, newline), values written as Go writes floats (``1.0``, ``+Inf``, ``NaN``,
``1.5e+09``). A counter family ``x`` is exposed as ``x_total``, an info family ``x`` as the gauge
``x_info`` whose samples are 1; a histogram's samples are ``_bucket`` (cumulative, ``le`` up to
``+Inf``), ``_count`` and ``_sum``. There are no ``_created`` series.

Prometheus accepts this format whatever its ``Accept`` header asks for first, so it is the only one
served. Pure functions and one value class; the HTTP side is in :mod:`.http`.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Literal
from urllib.parse import parse_qs

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Kind = Literal["counter", "gauge", "histogram", "info"]
KINDS: tuple[Kind, ...] = ("counter", "gauge", "histogram", "info")

Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, Labels, float]
"""Sample name (as exposed), its labels in any order, its value."""

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")

GZIP_WBITS = 16 + zlib.MAX_WBITS
"""zlib's window-bits value that asks for a gzip header and trailer (``Content-Encoding: gzip``)."""


def check_metric_name(name: str) -> str:
    """``name`` if Prometheus accepts it as a metric name, else ValueError saying so."""
    if not _METRIC_NAME.match(name):
        raise ValueError(f"invalid metric name {name!r}: want [a-zA-Z_:][a-zA-Z0-9_:]*")
    return name


def check_label_name(name: str) -> str:
    """``name`` if Prometheus accepts it as a label name (``__`` is reserved), else ValueError."""
    if not _LABEL_NAME.match(name) or name.startswith("__"):
        raise ValueError(f"invalid label name {name!r}: want [a-zA-Z_][a-zA-Z0-9_]*, not starting __")
    return name


def format_value(value: float) -> str:
    """A sample value in the spelling prometheus-client writes, which Go's float parser reads back:
    Python's shortest repr, except positive numbers from 1e6 up in exponent form (``1.5e+09``) as Go
    switches to it sooner than Python, and ``+Inf``, ``-Inf``, ``NaN``."""
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def escape_label_value(value: str) -> str:
    """A label value between double quotes: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    """A ``# HELP`` text: backslash and newline escaped (a double quote stays as it is)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


class Family:
    """One metric family as one scrape exposes it: name, help, kind, label names and samples.

    Built per scrape by collectors (the daemon's view) or from the live event series; ``add`` and
    ``add_info`` take the label values in ``label_names`` order, as the series were declared.
    Names are checked here, once, so the exposition never writes a line Prometheus would reject.
    """

    __slots__ = ("help", "kind", "label_names", "name", "samples")

    def __init__(self, name: str, help: str, kind: Kind, label_names: Sequence[str] = ()) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown metric kind {kind!r}: one of {', '.join(KINDS)}")
        self.name = check_metric_name(name)
        suffix = {"counter": "_total", "info": "_info"}.get(kind)
        if suffix and name.endswith(suffix):
            raise ValueError(f"{name}: name a {kind} without {suffix}, which the exposition adds")
        self.help = help
        self.kind: Kind = kind
        self.label_names = tuple(check_label_name(n) for n in label_names)
        if len(set(self.label_names)) != len(self.label_names):
            raise ValueError(f"{name}: label names repeat: {', '.join(self.label_names)}")
        self.samples: list[Sample] = []

    @property
    def exposed_name(self) -> str:
        """The name in ``# HELP``/``# TYPE``: counters end in ``_total``, info families in ``_info``."""
        if self.kind == "counter":
            return self.name + "_total"
        if self.kind == "info":
            return self.name + "_info"
        return self.name

    @property
    def exposed_type(self) -> str:
        """The ``# TYPE``: an info family is a gauge whose samples are always 1."""
        return "gauge" if self.kind == "info" else self.kind

    def labels_of(self, values: Sequence[str]) -> Labels:
        """``values`` paired with the label names; ValueError if their number differs."""
        if len(values) != len(self.label_names):
            raise ValueError(
                f"{self.name}: {len(values)} label value(s) for label(s) ({', '.join(self.label_names)})"
            )
        return tuple(zip(self.label_names, values, strict=True))

    def add(self, values: Sequence[str], value: float) -> None:
        """One sample of a counter or gauge family."""
        if self.kind not in ("counter", "gauge"):
            raise ValueError(f"{self.name}: add() is for counters and gauges, not a {self.kind}")
        self.samples.append((self.exposed_name, self.labels_of(values), float(value)))

    def add_info(self, values: Sequence[str], info: Mapping[str, str]) -> None:
        """One sample of an info family: the identifying labels plus ``info``'s, value 1."""
        if self.kind != "info":
            raise ValueError(f"{self.name}: add_info() is for info families, not a {self.kind}")
        labels = self.labels_of(values)
        clash = set(info) & set(self.label_names)
        if clash:
            raise ValueError(f"{self.name}: info labels repeat label names: {', '.join(sorted(clash))}")
        extra = tuple((check_label_name(k), v) for k, v in info.items())
        self.samples.append((self.exposed_name, labels + extra, 1.0))

    def restricted(self, names: Collection[str]) -> Family | None:
        """This family with only the samples named in ``names``; None when none is."""
        kept = [s for s in self.samples if s[0] in names]
        if not kept:
            return None
        family = Family.__new__(Family)
        family.name, family.help, family.kind = self.name, self.help, self.kind
        family.label_names, family.samples = self.label_names, kept
        return family


def sample_line(name: str, labels: Labels, value: float) -> str:
    """One sample line, labels sorted by name as prometheus-client sorts them."""
    if not labels:
        return f"{name} {format_value(value)}\n"
    pairs = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(labels))
    return f"{name}{{{pairs}}} {format_value(value)}\n"


def render(families: Iterable[Family]) -> bytes:
    """The exposition of ``families``, in their order; a family without samples keeps its HELP and TYPE."""
    out: list[str] = []
    for family in families:
        name = family.exposed_name
        out.append(f"# HELP {name} {escape_help(family.help)}\n# TYPE {name} {family.exposed_type}\n")
        out.extend(sample_line(*sample) for sample in family.samples)
    return "".join(out).encode()


def requested_names(query_string: str) -> frozenset[str] | None:
    """The sample names a ``?name[]=a&name[]=b`` query asks for; None when it names none (all)."""
    names = parse_qs(query_string).get("name[]")
    return frozenset(names) if names else None


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header lets us gzip: it names ``gzip`` with a q above 0."""
    for item in accept_encoding.split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        if coding.lower() != "gzip":
            continue
        for param in params:
            key, _, weight = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    return float(weight) > 0
                except ValueError:
                    return False
        return True
    return False


def gzip_compress(body: bytes) -> bytes:
    """``body`` as a gzip member (zlib's own gzip framing, so the gzip module is not imported)."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, GZIP_WBITS)
    return compressor.compress(body) + compressor.flush()
