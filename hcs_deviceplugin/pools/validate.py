"""``hcs-deviceplugin validate-config PATH...``: check pool ConfigMaps offline, exactly as the daemon would.

Meant for CI and for the moment before ``kubectl apply``: the daemon refuses a bad object (keeping its
last good version) and says why only in its log, metrics and Events; this says the same thing, in the
same words, before the object reaches a node. Each PATH is one of:

* a **Kubernetes manifest**: YAML documents of ``kind: ConfigMap`` (several per file, or a
  ``kind: List`` as ``kubectl get -o yaml`` writes); each ConfigMap is parsed as the API source
  would deliver it (``configmap <namespace>/<name>``), format recognised by name, labels and keys;
* a **raw native document** (``pools.yaml``; ``.json`` is read as JSON);
* a DKP **NodeGroup** ConfigMap is checked config by config (``Exclusive``, ``TimeSlicing``, ...), each
  as if the node's label named it; its pools are listed per config and take no part in the merge, since
  which config a node uses is decided by the node's label, not here;
* a **directory** laid out as the daemon's mounted pools directory (top-level files and one
  sub-directory per ConfigMap).

All objects are merged as the daemon merges them, so a pool defined twice is reported too. Output
(stdout): warnings (``warning: ...``), every error as the daemon logs it (``<source>: <path>:
<message>``), one line per valid object with its pools, cards claimed by more than one pool (which the
daemon gives to neither), and a total. Exit status: 0 all valid, 1 any error, 2 a usage problem (no
PATH, or one that cannot be read; reported on stderr).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from hcs_deviceplugin.model import Pool
from hcs_deviceplugin.pools.aggregate import ObjectResult, errors_of, merge, parse_object
from hcs_deviceplugin.pools.conflicts import find_conflicts
from hcs_deviceplugin.pools.document import load_documents
from hcs_deviceplugin.pools.errors import FILE_PATH, ConfigError, ConfigErrors
from hcs_deviceplugin.pools.fields import describe_value
from hcs_deviceplugin.pools.files import TooBig, read_bytes
from hcs_deviceplugin.pools.formats import Format, detect_format, native_syntax, parse_configmap_located
from hcs_deviceplugin.pools.located import LocatedPool
from hcs_deviceplugin.pools.mounted import ReadError, list_mounted, read_configmap_directory, read_file_object
from hcs_deviceplugin.pools.native import parse_native, warn_no_pools
from hcs_deviceplugin.pools.nodegroup import parse_every_config
from hcs_deviceplugin.pools.objects import ConfigMapObject

USAGE = (
    "usage: hcs-deviceplugin validate-config PATH...  (ConfigMap manifests, native pool files, directories)"
)
EXIT_VALID, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
SOURCE = "validate"

_ErrorSink = Callable[[str, str], None]
_Reader = Callable[[Path, str], ConfigMapObject]


class _Unreadable(Exception):
    """A PATH that cannot be read at all: a usage problem, not a config error."""


@dataclass
class _Unit:
    """One thing checked on its own: a ConfigMap, or a raw native file."""

    source: str
    kind: Format
    outcome: tuple[LocatedPool, ...] | Exception
    key: tuple[str, str]
    described: str = ""
    """What the valid line says instead of the merged pools (NodeGroup: pools per config)."""


@dataclass
class _Loaded:
    units: list[_Unit] = field(default_factory=list)
    errors: list[ConfigError] = field(default_factory=list)


def main(paths: Sequence[str], stdout: TextIO, stderr: TextIO, env: Mapping[str, str] | None = None) -> int:
    """Validate ``paths``; see the module docstring. ``env`` supplies NVIDIA_RESOURCE_PREFIX."""
    if not paths:
        print(USAGE, file=stderr)
        return EXIT_USAGE
    loaded = _Loaded()
    unreadable = False
    with _captured_warnings() as warnings:
        for path in paths:
            try:
                _load(Path(path), loaded, env)
            except _Unreadable as exc:
                print(f"{path}: {exc}", file=stderr)
                unreadable = True
    results = [
        ObjectResult(unit.key, SOURCE, (), errors_of(unit.source, unit.outcome))
        if isinstance(unit.outcome, Exception)
        else ObjectResult(unit.key, SOURCE, () if unit.described else unit.outcome)
        for unit in loaded.units
    ]
    merged = merge(results, {SOURCE: loaded.errors})
    for warning in warnings:
        print(f"warning: {warning}", file=stdout)
    for error in merged.errors:
        print(error, file=stdout)
    failed = {error.source for error in merged.errors}
    for unit in loaded.units:
        if not isinstance(unit.outcome, Exception) and unit.source not in failed:
            pools = unit.described or _describe([located.pool for located in unit.outcome])
            print(f"{unit.source}: valid {unit.kind} config, {pools}", file=stdout)
    for key, names in sorted(find_conflicts(merged.pools.pools).items(), key=lambda kv: str(kv[0])):
        print(f"warning: {key} is claimed by pools {', '.join(names)}: none of them gets it", file=stdout)
    print(
        f"{len(loaded.units)} object(s), {len(merged.pools.pools)} pool(s), {len(merged.errors)} error(s)",
        file=stdout,
    )
    if unreadable:
        return EXIT_USAGE
    return EXIT_INVALID if merged.errors else EXIT_VALID


def _describe(pools: Sequence[Pool]) -> str:
    if not pools:
        return "no pools"
    parts = []
    for pool in pools:
        mode = f"{pool.unit}" + (f" x{pool.slices_per_unit}" if pool.time_sliced else "")
        mode += f" {pool.sharing}" if pool.sharing else ""
        if pool.memory_per_replica:
            mode += f" {pool.memory_per_replica // (1 << 20)}Mi each"
        count = len(pool.devices)
        entries = f"{count} device entr{'y' if count == 1 else 'ies'}"
        parts.append(f"{pool.name} ({pool.resource_name}, {mode}, {entries})")
    return "pools: " + "; ".join(parts)


def _load(path: Path, loaded: _Loaded, env: Mapping[str, str] | None) -> None:
    if path.is_dir():
        _load_directory(path, loaded, env)
        return
    try:
        content = read_bytes(path, regular_only=False)
    except TooBig as exc:
        loaded.errors.append(exc.error)
        return
    except ReadError as exc:
        raise _Unreadable(exc.error.message) from exc
    except OSError as exc:
        raise _Unreadable(f"cannot read: {exc.strerror or exc}") from exc
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        loaded.errors.append(
            ConfigError(str(path), FILE_PATH, f"not UTF-8: {exc.reason} at byte {exc.start}")
        )
        return
    manifests = _manifests(text, str(path), loaded)
    if manifests is None:
        loaded.units.append(_raw_native(path, text))
        return
    for obj in manifests:
        loaded.units.append(_unit(obj, env))


def _load_directory(path: Path, loaded: _Loaded, env: Mapping[str, str] | None) -> None:
    try:
        listing = list_mounted(path)
    except OSError as exc:
        raise _Unreadable(f"cannot list: {exc.strerror or exc}") from exc
    for name in listing.files:
        _load_entry(path, name, read_file_object, loaded, env)
    for name in listing.configmaps:
        _load_entry(path, name, read_configmap_directory, loaded, env)


def _load_entry(
    path: Path, name: str, reader: _Reader, loaded: _Loaded, env: Mapping[str, str] | None
) -> None:
    try:
        obj = reader(path, name)
    except ReadError as exc:
        loaded.errors.append(exc.error)
        return
    except FileNotFoundError:
        return
    loaded.units.append(_unit(obj, env))


def _unit(obj: ConfigMapObject, env: Mapping[str, str] | None) -> _Unit:
    try:
        kind = detect_format(obj)
    except ConfigErrors as exc:
        return _Unit(obj.source, Format.NATIVE, exc, obj.key)
    if kind is Format.NODEGROUP:
        try:
            configs = parse_every_config(obj, env)
        except ConfigErrors as exc:
            return _Unit(obj.source, kind, exc, obj.key)
        described = "; ".join(
            f"{name}: {_describe([located.pool for located in pools])}" for name, pools in configs.items()
        )
        return _Unit(obj.source, kind, (), obj.key, described or "no configs")
    return _Unit(obj.source, kind, parse_object(obj, lambda o: parse_configmap_located(o, env)), obj.key)


def _raw_native(path: Path, text: str) -> _Unit:
    source = str(path)
    syntax = native_syntax(path.name) or "yaml"
    try:
        pools = parse_native(text, source, syntax)
    except ConfigErrors as exc:
        return _Unit(source, Format.NATIVE, exc, ("", source))
    if not pools:
        warn_no_pools(source)
    located = tuple(LocatedPool(pool, f"pools[{index}].name") for index, pool in enumerate(pools))
    return _Unit(source, Format.NATIVE, located, ("", source))


def _manifests(text: str, source: str, loaded: _Loaded) -> list[ConfigMapObject] | None:
    """The ConfigMaps of a manifest file, or ``None`` when the file is not manifests (a raw document)."""
    try:
        documents = load_documents(text, source)
    except ConfigErrors:
        return None  # not YAML at all: the native parser reports the syntax error in its words
    if not any(isinstance(d, Mapping) and "kind" in d for d in documents):
        return None
    objects: list[ConfigMapObject] = []
    for index, document in enumerate(documents):
        if document is not None:
            _collect(document, f"documents[{index}]", source, objects, loaded)
    return objects


def _collect(document: object, path: str, source: str, out: list[ConfigMapObject], loaded: _Loaded) -> None:
    def error(where: str, message: str) -> None:
        loaded.errors.append(ConfigError(source, where, message))

    if not isinstance(document, Mapping):
        error(path, f"must be a Kubernetes object, got {describe_value(document)}")
        return
    kind = document.get("kind")
    if kind == "List":
        items = document.get("items")
        if not isinstance(items, list):
            error(f"{path}.items", f"must be a list, got {describe_value(items)}")
            return
        for index, entry in enumerate(items):
            _collect(entry, f"{path}.items[{index}]", source, out, loaded)
        return
    if kind != "ConfigMap":
        error(f"{path}.kind", f"must be ConfigMap or List, got {describe_value(kind)}")
        return
    obj = _configmap(document, path, error)
    if obj is not None:
        out.append(obj)


def _configmap(document: Mapping[object, object], path: str, error: _ErrorSink) -> ConfigMapObject | None:
    metadata = document.get("metadata")
    if not isinstance(metadata, Mapping):
        error(f"{path}.metadata", f"must be a mapping, got {describe_value(metadata)}")
        return None
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        error(f"{path}.metadata.name", f"must be a non-empty string, got {describe_value(name)}")
        return None
    namespace = metadata.get("namespace") or ""
    if not isinstance(namespace, str):
        error(f"{path}.metadata.namespace", f"must be a string, got {describe_value(namespace)}")
        return None
    labels = _strings(metadata.get("labels"), f"{path}.metadata.labels", error)
    data = _strings(document.get("data"), f"{path}.data", error)
    if labels is None or data is None:
        return None
    version = metadata.get("resourceVersion")
    return ConfigMapObject(
        name=name,
        namespace=namespace,
        data=data,
        labels=labels,
        resource_version=version if isinstance(version, str) else "",
        source=f"configmap {namespace}/{name}" if namespace else f"configmap {name}",
    )


def _strings(value: object, path: str, error: _ErrorSink) -> dict[str, str] | None:
    """A string → string map (ConfigMap data, labels); the API refuses anything else."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        error(path, f"must be a mapping of strings, got {describe_value(value)}")
        return None
    bad = [k for k, v in value.items() if not isinstance(k, str) or not isinstance(v, str)]
    for key in bad:
        error(f"{path}.{key}", f"must be a string (quote it), got {describe_value(value[key])}")
    return None if bad else {str(k): str(v) for k, v in value.items()}


@contextmanager
def _captured_warnings() -> Iterator[list[str]]:
    """Warnings the formats log (legacy patterns, ignored fields), collected instead of logged."""
    captured: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record.getMessage())

    logger = logging.getLogger("hcs_deviceplugin.pools")
    handler = _Collect(level=logging.WARNING)
    propagate, level = logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        yield captured
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = propagate, level
