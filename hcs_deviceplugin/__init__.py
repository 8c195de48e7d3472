"""hcs-deviceplugin: a vendor-neutral kubelet device plugin daemon serving one plugin per pool."""

__version__ = "0.1.0"
