"""Huawei Ascend backend: NPU chips and vNPUs through DCMI (``libdcmi.so``) via ctypes, with a fake library.

The entry point ``hcs_deviceplugin.vendors:ascend`` names :func:`create_backend`. Importing this package
pulls in ctypes and the model only (no gRPC). ``fake/`` holds the C fake of ``libdcmi.so`` for tests.
"""

from vendors.ascend.backend import AscendBackend, AscendSettings, create_backend

__all__ = ["AscendBackend", "AscendSettings", "create_backend"]
