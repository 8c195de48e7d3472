"""Keys of the Hygon facts discovery stores in ``Card.attributes`` (strings, for reports and labels).

Allocate reads nothing from here: the DRM minors it needs are kept in the backend's own discovery
snapshot (:class:`vendors.hygon.discovery.CardFacts`), so these are informative copies.
"""

CU_COUNT = "cuCount"  # KFD simd_count / simd_per_cu
GFX_TARGET = "gfxTarget"  # from KFD gfx_target_version, e.g. gfx928
DRM_CARD_MINOR = "drmCardMinor"  # /dev/dri/card<N>
DRM_RENDER_MINOR = "drmRenderMinor"  # /dev/dri/renderD<M>
KFD_GPU_ID = "kfdGpuId"  # the KFD handle vDCU sysfs keys on
DRIVER = "driver"  # hydcu | hycu | amdgpu
DRIVER_VERSION = "driverVersion"  # /sys/module/<driver>/version
HIVE_ID = "hiveId"  # KFD hive_id when non-zero (cards of one xGMI hive share it)
IDENTITY_SOURCE = "identitySource"  # serial_number | unique_id | kfd-unique_id | pci-address
FAULT = "fault"  # why the card is Unhealthy at discovery, naming the file where one is to blame
