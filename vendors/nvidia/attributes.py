"""Keys of the vendor facts discovery stores in ``Card.attributes`` / ``Partition.attributes``.

Allocate must not call NVML (ARCHITECTURE.md invariant 7), so everything ContainerEdits needs - minor
numbers, NVML indices, MIG slots and capability device nodes - is captured at discovery as strings.
"""

# Card
MINOR = "minor"  # /dev/nvidia<minor>
INDEX = "index"  # NVML index, NVIDIA_VISIBLE_DEVICES under deviceIDStrategy=index
BUS_ID = "busId"  # as NVML writes it, 00000000:17:00.0
MIG_MODE = "migMode"  # enabled | disabled | unsupported
COMPUTE_CAPABILITY = "computeCapability"  # e.g. 9.0
DRIVER_VERSION = "driverVersion"
CONTROL_DEVICES = "controlDevices"  # comma list of node-wide device nodes present on the host

# Partition (MIG device)
PARENT_MINOR = "parentMinor"
PARENT_INDEX = "parentIndex"
MIG_INDEX = "migIndex"  # slot of nvmlDeviceGetMigDeviceHandleByIndex: "<parentIndex>:<migIndex>"
GPU_INSTANCE_ID = "gpuInstanceId"
COMPUTE_INSTANCE_ID = "computeInstanceId"
GPU_INSTANCE_PROFILE_ID = "gpuInstanceProfileId"
COMPUTE_INSTANCE_PROFILE_ID = "computeInstanceProfileId"
PLACEMENT_START = "placementStart"
PLACEMENT_SIZE = "placementSize"
CAP_GPU_INSTANCE = "capGpuInstance"  # /dev/nvidia-caps/nvidia-cap<N> of the GI
CAP_COMPUTE_INSTANCE = "capComputeInstance"  # ... of the CI
