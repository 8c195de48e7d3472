"""NVIDIA backend: GPUs and MIG devices through NVML (pynvml), with a faithful fake libnvidia-ml for tests.

The entry point ``hcs_deviceplugin.vendors:nvidia`` names :func:`create_backend`. Importing this
package pulls in pynvml and the model only (no gRPC), so the read-only probe can run on a node with
an older grpcio.
"""

from vendors.nvidia.backend import NvidiaBackend, NvidiaSettings, create_backend

__all__ = ["NvidiaBackend", "NvidiaSettings", "create_backend"]
