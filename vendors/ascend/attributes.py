"""Keys of the DCMI facts discovery stores in ``Card.attributes`` / ``Partition.attributes``.

Allocate must not call DCMI (ARCHITECTURE.md invariant 7), and health polling and vNPU layouts need the
V2 address of a chip, so everything they use is captured at discovery as strings.
"""

# Card (one chip / die)
CARD_ID = "cardId"  # DCMI card_id (a board or module)
DEVICE_ID = "deviceId"  # chip index inside the card
LOGIC_ID = "logicId"
PHY_ID = "phyId"  # N of /dev/davinciN and ASCEND_VISIBLE_DEVICES
FAMILY = "family"  # Ascend310P, Ascend910, Ascend910B, Ascend910A3 ...
CHIP_TYPE = "chipType"
CHIP_NAME = "chipName"
CHIP_VERSION = "chipVersion"
NPU_NAME = "npuName"
AI_CORES = "aiCores"
BOARD_ID = "boardId"  # 0x..
PRODUCT_TYPE = "productType"
MEMORY_KIND = "memoryKind"  # hbm | ddr
DIE_ID = "dieId"  # VDIE id, five %08X words
IDENTITY = "identity"  # vdie | pci | phy: where Card.id came from
VNPU_TEMPLATES = "vnpuTemplates"  # comma list; empty when the chip has no vNPU support
DRIVER_VERSION = "driverVersion"

# Partition (vNPU)
VDEV_ID = "vdevId"  # N of /dev/vdavinciN; the vNPU id in ASCEND_VISIBLE_DEVICES
VFG_ID = "vfgId"
TEMPLATE = "template"
RESOURCE_SUFFIX = "resourceSuffix"  # MindX's name: vir05_1c_16g -> 5c.1cpu.16g
IN_USE = "containerUsed"  # is_container_used as DCMI last reported it
