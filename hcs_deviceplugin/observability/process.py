"""The standard ``process_*`` metrics, read from ``/proc`` per scrape as every Prometheus client does.

Same names, help texts, order and arithmetic as prometheus-client's ``ProcessCollector``, so
dashboards built on them keep working: memory from ``/proc/<pid>/stat`` (virtual bytes; resident
pages times the page size), start time as ``starttime`` clock ticks after boot plus the boot time
from ``/proc/stat``, CPU as user plus system ticks, open descriptors by listing ``fd/`` and their
limit from ``limits``; the page size from ``sysconf`` (the ``resource`` module, an extension
loaded at every start, is not needed for it). Where ``/proc`` cannot be read (not Linux) nothing
is exposed, and a part that fails to read (a race with a closing descriptor) leaves only its own
families out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from hcs_deviceplugin.observability.exposition import Family

PREFIX = "process_"


def _gauge(name: str, help: str, value: float) -> Family:
    family = Family(PREFIX + name, help, "gauge")
    family.add((), value)
    return family


def _boot_time(proc: Path) -> float:
    """Seconds since the epoch when the machine booted (``btime`` of ``/proc/stat``); 0 if unknown."""
    try:
        with (proc / "stat").open("rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def _clock_ticks() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100.0


class ProcessCollector:
    """``process_*`` of process ``pid`` (default: this one) under ``proc``."""

    def __init__(self, proc: str | Path = "/proc", pid: int | str = "self") -> None:
        self._proc = Path(proc)
        self._dir = self._proc / str(pid)
        self._ticks = _clock_ticks()
        self._page_size = os.sysconf("SC_PAGE_SIZE")  # what resource.getpagesize() returns
        self._boot_time = _boot_time(self._proc)

    def describe(self) -> Iterable[Family]:
        gauges = (
            "virtual_memory_bytes",
            "resident_memory_bytes",
            "start_time_seconds",
            "open_fds",
            "max_fds",
        )
        return [
            Family(PREFIX + "cpu_seconds", "", "counter"),
            *(Family(PREFIX + g, "", "gauge") for g in gauges),
        ]

    def collect(self) -> Iterable[Family]:
        if not self._boot_time:
            return []
        return [*self._from_stat(), *self._descriptors()]

    def _from_stat(self) -> list[Family]:
        try:
            with (self._dir / "stat").open("rb") as stat:
                # The command name (field 2) may hold spaces and ')': split after its last ')'.
                fields = stat.read().split(b")")[-1].split()
        except OSError:
            return []
        cpu = Family(PREFIX + "cpu_seconds", "Total user and system CPU time spent in seconds.", "counter")
        cpu.add((), float(fields[11]) / self._ticks + float(fields[12]) / self._ticks)
        return [
            _gauge("virtual_memory_bytes", "Virtual memory size in bytes.", float(fields[20])),
            _gauge(
                "resident_memory_bytes", "Resident memory size in bytes.", float(fields[21]) * self._page_size
            ),
            _gauge(
                "start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                float(fields[19]) / self._ticks + self._boot_time,
            ),
            cpu,
        ]

    def _descriptors(self) -> list[Family]:
        try:
            max_fds = None
            with (self._dir / "limits").open("rb") as limits:
                for line in limits:
                    if line.startswith(b"Max open file"):
                        max_fds = float(line.split()[3])
                        break
            open_fds = len(os.listdir(self._dir / "fd"))
        except (OSError, ValueError):  # ValueError: a limit that is no number ("unlimited")
            return []
        families = [_gauge("open_fds", "Number of open file descriptors.", open_fds)]
        if max_fds is not None:
            families.append(_gauge("max_fds", "Maximum number of open file descriptors.", max_fds))
        return families
