"""A kubelet device manager you can run in a test: real v1beta1 / pod-resources v1 gRPC on unix sockets.

It registers plugins, consumes ListAndWatch, admits containers through GetPreferredAllocation and
Allocate, keeps kubelet's checkpoint, serves the pod-resources API and can be restarted mid-test, so
the daemon is exercised exactly as a node would exercise it (see KUBELET.md §8).
"""

from hcs_deviceplugin.kubeletsim.checkpoint import CheckpointError
from hcs_deviceplugin.kubeletsim.records import (
    AllocationError,
    AllocationRecord,
    RegisterRecord,
    ResourceView,
)
from hcs_deviceplugin.kubeletsim.simulator import KubeletSimulator, SnapshotListener

__all__ = [
    "AllocationError",
    "AllocationRecord",
    "CheckpointError",
    "KubeletSimulator",
    "RegisterRecord",
    "ResourceView",
    "SnapshotListener",
]
