"""Helpers shared by the backends that discover cards from sysfs, procfs and /dev (no vendor library).

Vendor-neutral: reading one PCI function, scanning the bus for a vendor id, host-path (PCIe/NUMA)
links from the sysfs device tree, a hotplug watcher (udev where the host has it, a bounded re-scan
always) and a health stream that turns per-card checks into change events. ``fake`` builds the same
layout under a temp host root for tests.
"""
