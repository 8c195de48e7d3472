"""The daemon, split by job (see core.py for the threads and what each may block on).

``state`` is the pure fold of events, ``supervisor`` every vendor call, ``applier`` every server
start, stop and delivery wait, and ``core`` the control loop wiring them; the pod-resources poller
lives in ``kubelet/``. The names below are what the rest of the project imports.
"""

from hcs_deviceplugin.daemon.applier import pool_topology
from hcs_deviceplugin.daemon.core import Daemon
from hcs_deviceplugin.daemon.supervisor import STREAM_END_GRACE_SECONDS
from hcs_deviceplugin.daemon.types import (
    DaemonConfig,
    DaemonObserver,
    DaemonView,
    InterceptorsFor,
    PoolSource,
    PoolSourceFactory,
    PoolView,
)

__all__ = [
    "STREAM_END_GRACE_SECONDS",
    "Daemon",
    "DaemonConfig",
    "DaemonObserver",
    "DaemonView",
    "InterceptorsFor",
    "PoolSource",
    "PoolSourceFactory",
    "PoolView",
    "pool_topology",
]
