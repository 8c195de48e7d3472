"""Talking to kubelet: registration, noticing kubelet restarts, and (later) the pod-resources API."""
