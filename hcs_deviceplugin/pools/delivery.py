"""A pool's ``deviceDelivery``: read from the native format, or derived from DKP's device list strategy.

DKP's per-pool configs carry NVIDIA's ``deviceListStrategy``. Its CDI strategies mean "name the
devices in a CDI spec", which is now ours to write, so they become the pool's delivery, and the
backend is left with ``envvar`` (``NVIDIA_VISIBLE_DEVICES``): device nodes then come from our spec,
and on nodes whose runtime is the NVIDIA Container Runtime its hook still adds the driver libraries,
which our spec does not carry. ``envvar`` and ``volume-mounts`` alone keep the backend's own answer
(``deviceSpecs``: with ``passDeviceSpecs``, the device nodes too). With both CDI strategies listed,
``cdi-cri`` is used: the CRI field is what current kubelets and runtimes read first.
"""

from __future__ import annotations

from collections.abc import Mapping

from hcs_deviceplugin.model import DeviceDelivery

DELIVERIES = tuple(d.value for d in DeviceDelivery)
LIST_STRATEGY_OPTION = "deviceListStrategy"
_CDI_STRATEGIES = (DeviceDelivery.CDI_CRI, DeviceDelivery.CDI_ANNOTATIONS)


def delivery_from_strategies(options: Mapping[str, str]) -> tuple[DeviceDelivery, dict[str, str]]:
    """The delivery a DKP pool's options ask for, and the options the backend gets (see above)."""
    out = dict(options)
    listed = [s.strip() for s in options.get(LIST_STRATEGY_OPTION, "").split(",") if s.strip()]
    for delivery in _CDI_STRATEGIES:
        if delivery.value in listed:
            out[LIST_STRATEGY_OPTION] = "envvar"
            return delivery, out
    return DeviceDelivery.DEVICE_SPECS, out
