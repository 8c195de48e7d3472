"""Hygon DCU backend: discovery, health and ContainerEdits from sysfs and /dev, no vendor library.

The entry point ``hcs_deviceplugin.vendors:hygon`` names :func:`create_backend`; ``fake`` builds the
same sysfs and /dev layout under a temp host root for tests, ``simulate`` and the bench.
"""

from vendors.hygon.backend import HygonBackend, HygonSettings, create_backend

__all__ = ["HygonBackend", "HygonSettings", "create_backend"]
