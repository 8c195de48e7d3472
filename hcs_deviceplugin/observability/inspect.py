"""``hcs-deviceplugin inspect``: the node report of a running daemon, as tables or as JSON.

It asks the daemon's ``/report`` over HTTP rather than reading local state, so it works from a
``kubectl exec`` into the pod, from the node, or through a port-forward, and always shows what the
daemon itself believes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the type only: every command builds this parser, and report imports the daemon
    from hcs_deviceplugin.observability.report import JSON

DEFAULT_URL = "http://127.0.0.1:8080"
GIB = 1024**3


class InspectError(Exception):
    """The report could not be fetched or read; the message says what to check."""


def fetch_report(url: str, timeout: float = 5.0) -> JSON:
    """GET ``<url>/report`` and decode it."""
    import urllib.error  # here, not at the top: ``run`` builds this command's parser but never fetches
    import urllib.request

    target = url.rstrip("/") + "/report"
    try:
        with urllib.request.urlopen(target, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace").strip().splitlines()
        why = f" ({detail[0]})" if detail else ""
        raise InspectError(f"{target} answered HTTP {exc.code}: {exc.reason}{why}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise InspectError(
            f"cannot reach the daemon at {url}: {reason} (is it running, and is --url its metrics port?)"
        ) from exc
    try:
        report = json.loads(body)
    except ValueError as exc:
        raise InspectError(f"{target} did not return JSON: {exc}") from exc
    if not isinstance(report, dict):
        raise InspectError(f"{target} returned {type(report).__name__}, not a report object")
    return report


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _gib(value: Any) -> str:
    return f"{value / GIB:.1f}" if isinstance(value, int | float) else "-"


def _text(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def _links(topology: dict[str, Any]) -> str:
    """Links summarised per type (``NVLink x3``): a full peer list does not fit a table row."""
    counts: dict[str, int] = {}
    for link in topology.get("links") or []:
        counts[link.get("type", "?")] = counts.get(link.get("type", "?"), 0) + 1
    return ", ".join(f"{kind} x{n}" for kind, n in counts.items()) or "-"


def _cards(report: JSON) -> str:
    rows = []
    for device in report.get("devices", []):
        topology = device.get("topology") or {}
        held = device.get("heldUnits") or []
        rows.append(
            [
                _text(device.get("id")),
                _text(device.get("vendor")),
                _text(device.get("model")),
                f"{_gib(device.get('vramAllocated'))}/{_gib(device.get('vram'))}",
                _text(topology.get("busId")),
                _text(topology.get("numaNode")),
                _links(topology),
                _text(device.get("healthScore")),
                _text(device.get("pool")),
                str(len(device.get("units") or [])),
                ", ".join(held) if held else "-",
            ]
        )
    headers = ["CARD", "VENDOR", "MODEL", "VRAM GiB (held/total)", "BUS", "NUMA", "LINKS"]
    return table([*headers, "HEALTH", "POOL", "UNITS", "HELD UNITS"], rows)


def _pools(report: JSON) -> str:
    rows = []
    for pool in report.get("pools", []):
        registration = pool.get("registration") or {}
        status = _text(registration.get("status"))
        if registration.get("lastError"):
            status += f" ({registration['lastError']})"
        mode = _text(pool.get("mode"))
        if pool.get("slicesPerUnit", 1) > 1:
            mode += f" x{pool['slicesPerUnit']}"
        if pool.get("sharing"):
            mode += f" {_text(pool['sharing'])}"
        rows.append(
            [
                _text(pool.get("name")),
                _text(pool.get("resource")),
                mode,
                _text(pool.get("units")),
                _text(pool.get("healthy")),
                _text(pool.get("allocated")),
                status,
            ]
        )
    return table(["POOL", "RESOURCE", "MODE", "UNITS", "HEALTHY", "ALLOCATED", "REGISTRATION"], rows)


def _allocations(report: JSON) -> str:
    rows = [
        [
            _text(a.get("namespace")),
            _text(a.get("pod")),
            _text(a.get("container")),
            _text(a.get("resource")),
            _text(a.get("device")),
            _text(a.get("card")),
        ]
        for a in report.get("allocations") or []
    ]
    return table(["NAMESPACE", "POD", "CONTAINER", "RESOURCE", "DEVICE", "CARD"], rows)


def _draining(entry: JSON) -> str:
    line = (
        f"{entry['card']}: held under {entry['heldResource']}, moves to {entry['targetPool']} when released"
    )
    seconds = entry.get("seconds")
    return line + (f" (draining for {seconds:.0f} s)" if isinstance(seconds, int | float) else "")


def render_inspect(report: JSON) -> str:
    """Cards, pools, who holds what, then whatever needs attention (conflicts, draining, errors,
    backends)."""
    parts = [f"Node {_text(report.get('node'))}", "", "Cards", _cards(report), "", "Pools", _pools(report)]
    if report.get("allocations"):
        parts += ["", "Allocations", _allocations(report)]
    notes: list[tuple[str, list[str]]] = [
        (
            "Conflicts",
            [f"{c['card']}: claimed by {', '.join(c['pools'])}" for c in report.get("conflicts", [])],
        ),
        (
            "Draining",
            [_draining(d) for d in report.get("draining", [])],
        ),
        ("Config errors", list(report.get("configErrors", []))),
        ("Layout errors", list(report.get("layoutErrors", []))),
        (
            "Backends",
            [
                f"{b['name']}: {b['state']}" + (f" ({b['reason']})" if b.get("reason") else "")
                for b in report.get("backends", [])
                if b.get("state") != "running"
            ],
        ),
    ]
    for title, lines in notes:
        if lines:
            parts += ["", title, *lines]
    return "\n".join(parts) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hcs-deviceplugin inspect", description="Show the node report of a running daemon."
    )
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``inspect``, for the CLI to put on its subparser."""
    parser.add_argument(
        "--url", default=DEFAULT_URL, help=f"the daemon's HTTP endpoint (default {DEFAULT_URL})"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the daemon")


def run(args: argparse.Namespace) -> int:
    """Fetch and print; 1 with a message on stderr when the daemon cannot be read."""
    try:
        report = fetch_report(args.url, args.timeout)
    except InspectError as exc:
        print(f"hcs-deviceplugin inspect: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(render_inspect(report))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))
