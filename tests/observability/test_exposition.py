"""The text exposition: exact text for each rule, and agreement with Prometheus' own tools.

prometheus-client (a dev dependency) is the reference twice over: its parser must read back every
label value and help text we write, and its ``generate_latest`` must write the very same bytes for
the same families; ``promtool check metrics`` (where installed) must accept a real scrape.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import zlib
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from hcs_deviceplugin.observability.exposition import (
    CONTENT_TYPE,
    Family,
    Kind,
    accepts_gzip,
    escape_help,
    escape_label_value,
    format_value,
    gzip_compress,
    render,
    requested_names,
)
from tests.observability.conftest import Busy

PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (set PROMTOOL)")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1, "1.0"),
        (0, "0.0"),
        (-0.0, "-0.0"),
        (0.5, "0.5"),
        (-2.25, "-2.25"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (0.00025, "0.00025"),
        (123456.0, "123456.0"),
        (999999.0, "999999.0"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (12345678.0, "1.2345678e+07"),
        (1e7, "1e+07"),
        (1.79569124536e9, "1.79569124536e+09"),
        (81559 * 1024 * 1024, "8.5520809984e+10"),
        (-12345678.0, "-12345678.0"),
        (1e22, "1e+22"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (math.nan, "NaN"),
    ],
)
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("plain", "plain"),
        ("", ""),
        ('say "hi"', 'say \\"hi\\"'),
        ("C:\\path", "C:\\\\path"),
        ("two\nlines", "two\\nlines"),
        ('\\"\n', '\\\\\\"\\n'),
        ("tab\tand ünïcode ✓", "tab\tand ünïcode ✓"),
    ],
)
def test_escape_label_value(value: str, escaped: str) -> None:
    assert escape_label_value(value) == escaped


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("Plain help.", "Plain help."),
        ('a "quoted" word', 'a "quoted" word'),
        ("back\\slash", "back\\\\slash"),
        ("two\nlines", "two\\nlines"),
    ],
)
def test_escape_help(text: str, escaped: str) -> None:
    assert escape_help(text) == escaped


def test_render_writes_each_kind_exactly() -> None:
    counter = Family("x_events", "Events.", "counter", ["pool"])
    counter.add(["b"], 2)
    counter.add(["a"], 0)
    gauge = Family("x_up", 'Up "now".\nSecond line \\.', "gauge")
    gauge.add([], 1)
    info = Family("x_build", "Build.", "info", ["z"])
    info.add_info(["last"], {"version": 'v"1', "a": "first"})
    empty = Family("x_draining_seconds", "None now.", "gauge", ["card"])
    histogram = Family("x_seconds", "Latency.", "histogram", ["pool"])
    labels = histogram.labels_of(["a"])
    histogram.samples += [
        ("x_seconds_bucket", (*labels, ("le", "0.5")), 1.0),
        ("x_seconds_bucket", (*labels, ("le", "+Inf")), 2.0),
        ("x_seconds_count", labels, 2.0),
        ("x_seconds_sum", labels, 3.25),
    ]
    assert render([counter, gauge, info, empty, histogram]).decode() == (
        "# HELP x_events_total Events.\n"
        "# TYPE x_events_total counter\n"
        'x_events_total{pool="b"} 2.0\n'
        'x_events_total{pool="a"} 0.0\n'
        '# HELP x_up Up "now".\\nSecond line \\\\.\n'
        "# TYPE x_up gauge\n"
        "x_up 1.0\n"
        "# HELP x_build_info Build.\n"
        "# TYPE x_build_info gauge\n"
        'x_build_info{a="first",version="v\\"1",z="last"} 1.0\n'
        "# HELP x_draining_seconds None now.\n"
        "# TYPE x_draining_seconds gauge\n"
        "# HELP x_seconds Latency.\n"
        "# TYPE x_seconds histogram\n"
        'x_seconds_bucket{le="0.5",pool="a"} 1.0\n'
        'x_seconds_bucket{le="+Inf",pool="a"} 2.0\n'
        'x_seconds_count{pool="a"} 2.0\n'
        'x_seconds_sum{pool="a"} 3.25\n'
    )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Family("9lives", "", "gauge"), "invalid metric name"),
        (lambda: Family("a-b", "", "gauge"), "invalid metric name"),
        (lambda: Family("ok", "", "summary"), "unknown metric kind"),  # type: ignore[arg-type]
        (lambda: Family("ok_total", "", "counter"), "without _total, which the exposition adds"),
        (lambda: Family("ok_info", "", "info"), "without _info"),
        (lambda: Family("ok", "", "gauge", ["bad-label"]), "invalid label name"),
        (lambda: Family("ok", "", "gauge", ["__reserved"]), "invalid label name"),
        (lambda: Family("ok", "", "gauge", ["a", "a"]), "label names repeat"),
        (lambda: Family("ok", "", "gauge", ["a"]).add([], 1), r"0 label value\(s\) for label\(s\) \(a\)"),
        (lambda: Family("ok", "", "gauge", ["a"]).add(["x", "y"], 1), "2 label value"),
        (lambda: Family("ok", "", "info").add([], 1), "add\\(\\) is for counters and gauges"),
        (lambda: Family("ok", "", "gauge").add_info([], {}), "add_info\\(\\) is for info families"),
        (lambda: Family("ok", "", "info", ["a"]).add_info(["x"], {"a": "y"}), "repeat label names: a"),
        (lambda: Family("ok", "", "info").add_info([], {"no good": "y"}), "invalid label name"),
    ],
)
def test_bad_families_are_refused_with_the_reason(build: object, message: str) -> None:
    assert callable(build)
    with pytest.raises(ValueError, match=message):
        build()


def test_a_refused_sample_leaves_the_family_as_it_was() -> None:
    family = Family("ok", "", "gauge", ["a"])
    family.add(["x"], 1)
    with pytest.raises(ValueError):
        family.add(["x", "y"], 2)
    assert family.samples == [("ok", (("a", "x"),), 1.0)]


@pytest.mark.parametrize(
    ("header", "gzip"),
    [
        ("", False),
        ("gzip", True),
        ("GZIP", True),
        ("deflate, gzip;q=0.5", True),
        ("gzip, deflate, br", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0", False),
        ("gzip;q=nonsense", False),
        ("x-gzip", False),
        ("identity", False),
    ],
)
def test_accepts_gzip(header: str, gzip: bool) -> None:
    assert accepts_gzip(header) is gzip


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("", None),
        ("name[]=a", frozenset({"a"})),
        ("name[]=a&name[]=b_total", frozenset({"a", "b_total"})),
        ("name%5B%5D=a", frozenset({"a"})),
        ("other=1", None),
    ],
)
def test_requested_names(query: str, names: frozenset[str] | None) -> None:
    assert requested_names(query) == names


def test_restricted_keeps_only_named_samples_and_drops_emptied_families() -> None:
    family = Family("x", "X.", "counter", ["a"])
    family.add(["1"], 1)
    assert family.restricted({"x_total"}) is not None
    assert family.restricted({"x"}) is None
    assert render([f for f in (family.restricted({"x_total"}),) if f]) == render([family])


def test_gzip_body_decompresses_to_the_exposition() -> None:
    body = b"# HELP x X.\n# TYPE x gauge\nx 1.0\n" * 50
    packed = gzip_compress(body)
    assert packed[:2] == b"\x1f\x8b"  # a gzip member, as Content-Encoding: gzip promises
    assert zlib.decompress(packed, 16 + zlib.MAX_WBITS) == body
    assert len(packed) < len(body)


# --- agreement with prometheus-client -------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not n.endswith(("_total", "_info"))
)
LABEL = NAME.filter(lambda n: not n.startswith("__") and n != "le")


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**63), 2**63))
def test_format_value_is_prometheus_clients(value: float) -> None:
    assert format_value(value) == floatToGoString(value)  # type: ignore[no-untyped-call]


# The Python parser strips each line, so whitespace around a help text cannot come back through it.
HELP = TEXT.map(str.strip)


@given(values=st.lists(TEXT, min_size=1, max_size=3), help=HELP)
def test_any_label_value_and_help_round_trip_through_the_official_parser(
    values: list[str], help: str
) -> None:
    names = [f"l{i}" for i in range(len(values))]
    family = Family("x", help, "gauge", names)
    family.add(values, 1.5)
    (parsed,) = text_string_to_metric_families(render([family]).decode())
    assert parsed.documentation == help
    ((_, labels, value),) = [(s.name, s.labels, s.value) for s in parsed.samples]
    assert labels == dict(zip(names, values, strict=True))
    assert value == 1.5


class _Reference(Collector):
    """The same families built with prometheus-client's classes, for its ``generate_latest``."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


SPEC_KINDS: tuple[Kind, ...] = ("counter", "gauge", "info")
FamilySpec = tuple[str, str, Kind, list[str], list[tuple[list[str], float]]]


@st.composite
def family_specs(draw: st.DrawFn) -> FamilySpec:
    kind = draw(st.sampled_from(SPEC_KINDS))
    label_names = draw(st.lists(LABEL, max_size=3, unique=True))
    rows = draw(
        st.lists(
            st.tuples(
                st.lists(TEXT, min_size=len(label_names), max_size=len(label_names)),
                st.floats(allow_nan=False) if kind != "info" else st.just(1.0),
            ),
            max_size=4,
        )
    )
    return draw(NAME), draw(TEXT), kind, label_names, rows


def _reference(spec: FamilySpec) -> Metric:
    name, help, kind, label_names, rows = spec
    if kind == "info":
        info = InfoMetricFamily(name, help, labels=label_names[:1])
        for values, _ in rows:
            info.add_metric(values[:1], dict(zip(label_names[1:], values[1:], strict=True)))
        return info
    family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, help, labels=label_names)
    for values, value in rows:
        family.add_metric(values, value)
    return family


def _ours(spec: FamilySpec) -> Family:
    name, help, kind, label_names, rows = spec
    if kind == "info":
        info = Family(name, help, kind, label_names[:1])
        for values, _ in rows:
            info.add_info(values[:1], dict(zip(label_names[1:], values[1:], strict=True)))
        return info
    family = Family(name, help, kind, label_names)
    for values, value in rows:
        family.add(values, value)
    return family


@given(st.lists(family_specs(), max_size=4, unique_by=lambda spec: spec[0]))
def test_render_writes_what_prometheus_client_writes(specs: list[FamilySpec]) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Reference([_reference(spec) for spec in specs]))
    assert render([_ours(spec) for spec in specs]) == generate_latest(registry)


# --- a real scrape --------------------------------------------------------------------------------


@needs_promtool
def test_promtool_checks_a_real_scrape(busy: Busy) -> None:
    """Prometheus' own linter: format, naming and help conventions of every family we serve."""
    status, text = busy.obs.get("/metrics")
    assert status == 200
    assert PROMTOOL is not None
    checked = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_content_type_is_text_format_0_0_4() -> None:
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
