"""One pool's kubelet device plugin: gRPC servicer, unix socket and registration lifecycle."""
