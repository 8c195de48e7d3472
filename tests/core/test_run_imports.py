"""What ``hcs-deviceplugin run`` loads before it knows it needs it: every module costs start-up CPU
and resident memory on every node. DRA (its gRPC servers and protos), jsonschema (a test and chart
tool), the Kubernetes client (only with an API source), grpcio (pools and DRA are served by
``hcs_deviceplugin.rpc``; grpcio only by the kubelet simulator, never the daemon), h2 (HTTP/2 is
``rpc.http2``'s) and the protobuf runtime (the daemon's messages are the generated ``api_wire``
codecs) stay out of a plain run's imports; so do python-json-logger (only with ``--log-format
json``), the DKP pool parsers (only when a ConfigMap in a DKP format arrives: recognising one needs
only :mod:`hcs_deviceplugin.pools.shapes`), waitress (the HTTP server's thread loads it once the pools
stream to kubelet; the port is bound before; so does what only its answers need, the probes and the
report), the CDI spec writer (loaded by a Daemon that has a
``--cdi-dir``, as it has by default), difflib (near misses, for a document with an unknown key) and
the allocator, topologies included (the whole ``allocation`` package: a pool streams with its
topology still to build, which ``run`` does once the pools stream; see ``test_run_loads_late``),
and the other commands' modules (``run`` builds only its own parser), and the node labeler with
the API paths it patches (only with ``--node-labels``; the label key flag is checked by
:mod:`~hcs_deviceplugin.observability.labelkeys`)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

NOT_AT_RUN = (
    "hcs_deviceplugin.dra",
    "jsonschema",
    "kubernetes",
    "grpc",
    "h2",  # HTTP/2 is hcs_deviceplugin.rpc.http2's; h2 is only the tests' independent peer
    "hyperframe",
    "google.protobuf",
    "hcs_deviceplugin.kubeletsim",
    "prometheus_client",
    "pythonjsonlogger",
    "hcs_deviceplugin.jsonlogs",
    "hcs_deviceplugin.pools.allowlist",
    "hcs_deviceplugin.pools.dkp",
    "hcs_deviceplugin.pools.nodegroup",
    "waitress",
    "hcs_deviceplugin.observability.probes",  # /healthz, /readyz: loaded as the HTTP server is built
    "hcs_deviceplugin.plugin.probe",
    "hcs_deviceplugin.observability.report",  # /report: the same
    "hcs_deviceplugin.cdi.publisher",
    "difflib",
    "hcs_deviceplugin.observability.inspect",  # the inspect command's: run builds only its own parser
    "hcs_deviceplugin.simulation",
    "hcs_deviceplugin.allocator",  # loaded once the pools stream (Daemon.prepare_allocation)
    "hcs_deviceplugin.allocation",  # topology, links, hierarchy, units, the search: the same
    "hcs_deviceplugin.layouts",  # partition layouts: loaded by the first apply with a Partition pool
    "hcs_deviceplugin.observability.nodelabels",  # the labeler: only with --node-labels (off by default)
    "hcs_deviceplugin.kubeapi",  # paths, client, ApiSettings: only with an API source, node labels or DRA
)

NATIVE = 'ConfigMapObject(name="pools", data={"pools.yaml": "version: v1\\npools: []\\n"})'
ALLOWLIST = 'ConfigMapObject(name="gpu-device-plugin-a", data={"DP_ALLOWED_DEVICES": ""})'


def probe(code: str) -> Any:
    """What a fresh interpreter running ``code`` printed last, as JSON."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout.splitlines()[-1])


def loaded_by_run(log_format: str = "text", configmap: str = NATIVE) -> list[str]:
    """The modules loaded once ``run``'s code is imported, its command line read, its logging set up
    and ``configmap`` parsed."""
    code = f"""
import json, sys
from hcs_deviceplugin import cli, runner
from hcs_deviceplugin.pools.formats import parse_configmap
from hcs_deviceplugin.pools.objects import ConfigMapObject
cli.parse_arguments(["run"], {{}})
cli.configure_logging({log_format!r}, "info")
parse_configmap({configmap})
print(json.dumps(sorted(sys.modules)))
"""
    loaded: list[str] = probe(code)
    return loaded


def test_a_plain_run_loads_none_of_what_it_does_not_use() -> None:
    loaded = loaded_by_run()
    assert "hcs_deviceplugin.daemon.core" in loaded  # the probe did load the run path
    assert "hcs_deviceplugin.pools.native" in loaded  # and did parse a native document
    unwanted = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_AT_RUN)]
    assert unwanted == []


API_PROBE = """
import json, sys
from hcs_deviceplugin import runner
from hcs_deviceplugin.kubeapi import client, config
from hcs_deviceplugin.pools import apisource, events, nodewatch
from hcs_deviceplugin.dra import claims, slices
print(json.dumps(sorted(sys.modules)))
"""

NOT_WITH_API = ("kubernetes", "urllib3", "requests", "oauthlib", "dateutil", "websocket")
"""The API source, Events, node labels and DRA talk to the apiserver through the standard library
(``hcs_deviceplugin.kubeapi``): none of the ``kubernetes`` package's stack is loaded for them."""


def test_the_api_source_loads_no_third_party_http_stack() -> None:
    loaded = probe(API_PROBE)
    assert "hcs_deviceplugin.kubeapi.client" in loaded
    unwanted = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_WITH_API)]
    assert unwanted == []


DRA_PROBE = """
import json, sys, tempfile
from pathlib import Path
from hcs_deviceplugin import runner
from hcs_deviceplugin.api.pluginregistration.v1 import api_wire as reg
from hcs_deviceplugin.dra import claims, frontend, slices
from hcs_deviceplugin.dra.health import HealthFeed
from hcs_deviceplugin.dra.server import REGISTRATION_SERVICE, DraPluginServer
from hcs_deviceplugin.rpc.client import unary_call

class Idle:
    def prepare(self, claim): raise AssertionError("no claim in this probe")
    def unprepare(self, claim): raise AssertionError("no claim in this probe")

root = Path(tempfile.mkdtemp(prefix="dra-probe-", dir="/tmp"))
server = DraPluginServer("gpu.example.com", root / "p", root / "r", Idle(), HealthFeed("node"))
server.start()
try:
    raw = unary_call(server.registration_path, REGISTRATION_SERVICE + "GetInfo", b"", 5.0)
    assert reg.PluginInfo.FromString(raw).name == "gpu.example.com"
finally:
    server.stop()
print(json.dumps(sorted(sys.modules)))
"""


def test_a_dra_node_serves_its_sockets_without_grpcio() -> None:
    """The runner's DRA modules, a plugin server started with its health stream and kubelet's first
    call answered: grpcio (75 ms of start-up, 20 MiB) is still not loaded."""
    loaded = probe(DRA_PROBE)
    assert "hcs_deviceplugin.dra.server" in loaded and "hcs_deviceplugin.rpc.server" in loaded
    assert [m for m in loaded if m == "grpc" or m.startswith("grpc.")] == []


def test_json_logs_and_a_dkp_configmap_load_what_they_need() -> None:
    """The other side of the guard: the lazy imports above do happen when they are needed."""
    loaded = loaded_by_run("json", ALLOWLIST)
    assert "pythonjsonlogger" in loaded and "hcs_deviceplugin.jsonlogs" in loaded
    assert "hcs_deviceplugin.pools.allowlist" in loaded


START_PROBE = """
import json, sys
from hcs_deviceplugin import runner
from hcs_deviceplugin.cdi import publisher
from hcs_deviceplugin.observability import metrics
from hcs_deviceplugin.plugin import sockets
metrics.Metrics()
sockets.socket_name_for("gpu.deckhouse.io/a")
print(json.dumps(sorted(sys.modules)))
"""

NOT_AT_START = ("hashlib", "_hashlib", "secrets", "platform", "resource")
"""OpenSSL's digests (about 5 ms), platform (about 2 ms) and resource (an extension module, 0.4 ms;
the process metrics read the page size from ``os.sysconf``) are loaded by no module a default run
starts with (the CDI writer, the metrics, the socket names); a long resource name loads hashlib."""


def test_a_default_start_loads_neither_openssl_digests_nor_platform() -> None:
    loaded = set(probe(START_PROBE))
    assert "hcs_deviceplugin.cdi.files" in loaded
    assert sorted(loaded & set(NOT_AT_START)) == []


PATTERN_PROBE = """
import json, re, sys
from hcs_deviceplugin import cli, runner
from hcs_deviceplugin.cdi import publisher
from vendors.nvidia import backend
compiled = sorted(
    f"{name}.{attr}"
    for name, module in list(sys.modules.items())
    if name.startswith(("hcs_deviceplugin", "vendors"))
    for attr, value in vars(module).items()
    if isinstance(value, re.Pattern)
)
print(json.dumps(compiled))
"""

COMPILED_AT_IMPORT = {
    "hcs_deviceplugin.cdi.names._CLASS_NAME",
    "hcs_deviceplugin.cdi.names._DEVICE_NAME",
    "hcs_deviceplugin.model._NON_LABEL",
    "hcs_deviceplugin.observability.exposition._LABEL_NAME",
    "hcs_deviceplugin.observability.exposition._METRIC_NAME",
    "hcs_deviceplugin.observability.labelkeys._NAME",
    "hcs_deviceplugin.pools.names._DNS1123_LABEL_RE",
    "hcs_deviceplugin.pools.names._DNS1123_SUBDOMAIN_RE",
    "hcs_deviceplugin.pools.names._QUALIFIED_NAME_RE",
    "hcs_deviceplugin.pools.shapes.ALLOWLIST_NAME_RE",
    "hcs_deviceplugin.pools.shapes.DKP_NAME_RE",
    "hcs_deviceplugin.pools.shapes.NODEGROUP_NAME_RE",
    "hcs_deviceplugin.rpc.http2._FIELD_NAME",
    "hcs_deviceplugin.rpc.http2._FIELD_VALUE",
}
"""The module-level patterns every default start uses before its pools stream (names of pools and
ConfigMaps, CDI names, metric names, HTTP/2 header checks), so compiling them at import costs
nothing extra. Any other pattern on the start path is a :class:`~hcs_deviceplugin.lazyre.LazyPattern`,
compiled when first used (a PCI address in a pool, a DRA driver name, a label to clean, MIG minors)."""


def test_a_start_compiles_at_import_only_the_patterns_every_start_uses() -> None:
    compiled = set(probe(PATTERN_PROBE))
    assert "hcs_deviceplugin.rpc.http2._FIELD_NAME" in compiled  # the probe did load the start path
    assert sorted(compiled - COMPILED_AT_IMPORT) == []


START_DATACLASSES = """
import dataclasses, json, sys
from hcs_deviceplugin import cli, runner
from hcs_deviceplugin.cdi import publisher
from vendors.nvidia import backend

def compiled(cls, method):
    code = getattr(vars(cls).get(method), "__code__", None)
    return code is not None and code.co_filename == "<string>"  # written by dataclass at class creation

def start_dataclasses():
    return [
        (f"{name}.{attr}", value)
        for name, module in list(sys.modules.items())
        if name.startswith(("hcs_deviceplugin", "vendors"))
        for attr, value in vars(module).items()
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == name
    ]
"""
"""A probe's first part: the dataclasses of ours a start creates (run's modules, the CDI writer, the
NVIDIA backend), as ``(module.Class, class)``, and whether dataclass compiled a class's method."""

DOC_PROBE = (
    START_DATACLASSES
    + """
print(json.dumps(sorted(n for n, c in start_dataclasses() if (c.__doc__ or "").startswith(c.__name__ + "("))))
"""
)


def test_every_dataclass_a_start_creates_has_a_docstring() -> None:
    """``dataclass`` writes a missing docstring from ``inspect.signature`` (some 60 µs a class at
    every start); a docstring that says why the class exists costs nothing."""
    assert probe(DOC_PROBE) == []


REPR_PROBE = (
    START_DATACLASSES
    + """
print(json.dumps(sorted(
    n for n, c in start_dataclasses()
    if getattr(getattr(c.__repr__, "__wrapped__", None), "__code__", None) is not None
    and c.__repr__.__wrapped__.__code__.co_filename == "<string>"  # compiled from dataclass's source
)))
"""
)


def test_no_dataclass_a_start_creates_compiles_its_own_repr() -> None:
    """Each is ``repr=False`` (never logged) or ``@field_repr``: no ``__repr__`` is compiled per class."""
    assert probe(REPR_PROBE) == []


EQ_PROBE = (
    START_DATACLASSES
    + """
print(json.dumps(sorted(
    f"{n}{' (ordered)' if compiled(c, '__lt__') else ''}"
    for n, c in start_dataclasses()
    if compiled(c, "__eq__") or compiled(c, "__lt__")
)))
"""
)

COMPARED_AT_RUN = {
    # the model: pools, inventories and edits are diffed, cards and units kept in sets and dict keys
    "hcs_deviceplugin.model.Card",
    "hcs_deviceplugin.model.Partition",
    "hcs_deviceplugin.model.Unit",
    "hcs_deviceplugin.model.DeviceSelector",
    "hcs_deviceplugin.model.Pool",
    "hcs_deviceplugin.model.SharingRequest",
    "hcs_deviceplugin.model.PoolSet",
    "hcs_deviceplugin.model.DeviceNode",
    "hcs_deviceplugin.model.Mount",
    "hcs_deviceplugin.model.ContainerEdits",
    "hcs_deviceplugin.model.Link",
    "hcs_deviceplugin.model.LinkMatrix",
    "hcs_deviceplugin.model.Inventory",
    "hcs_deviceplugin.model.HealthEvent",
    "hcs_deviceplugin.kubelet.podresources.DeviceAllocation",  # a List answer's set, compared to the last
    "hcs_deviceplugin.holds.ProvisionalHold",  # the store writes holds only when they changed
    "hcs_deviceplugin.pools.conflicts.DeviceKey",  # dict keys
    "hcs_deviceplugin.pools.errors.ConfigError",  # sources compare the errors they keep
    "hcs_deviceplugin.pools.located.LocatedPool",
    "hcs_deviceplugin.pools.native._Prefixes",  # a parse reuses the last pools only under equal prefixes
    "hcs_deviceplugin.pools.node.NodeContext",
    "hcs_deviceplugin.pools.objects.ConfigMapObject",
    "hcs_deviceplugin.reconciler.DesiredPool",  # desired state is diffed against what runs
    "hcs_deviceplugin.reconciler.HeldCard",
}
"""The dataclasses a start creates with a compiled ``__eq__`` (and ``__hash__``): those whose values
are compared or hashed. None is ``order=True`` (four more methods at every start): a List answer is
sorted by :meth:`DeviceAllocation.sort_key`. The CDI spec's ``NodeFacts``, the restart state, the
NVIDIA edit options, PCI info and Xid policy are only read field by field, and an Allocate
``Answer`` is kept in a dict by its request: ``eq=False``."""


def test_only_the_dataclasses_that_are_compared_compile_eq_and_none_compiles_order() -> None:
    compiled = set(probe(EQ_PROBE))
    assert "hcs_deviceplugin.model.Card" in compiled  # the probe did load the start path
    assert sorted(compiled - COMPARED_AT_RUN) == []
