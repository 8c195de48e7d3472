"""Generated gRPC stubs for the kubelet APIs we speak (see ``regenerate.py``)."""
