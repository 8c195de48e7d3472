"""``hcs-deviceplugin simulate``: the real daemon on a simulated node, with a kubelet simulator."""
