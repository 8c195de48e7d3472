"""Cambricon backend: MLUs from sysfs, procfs and /dev under a host root, with no Cambricon library.

The entry point ``hcs_deviceplugin.vendors:cambricon`` names :func:`create_backend`. ``fake`` builds
the same file layout under a temp root for tests, benches and ``simulate``.
"""

from vendors.cambricon.backend import CambriconBackend, CambriconSettings, create_backend

__all__ = ["CambriconBackend", "CambriconSettings", "create_backend"]
