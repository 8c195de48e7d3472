"""gRPC over HTTP/2 on unix sockets, in-process: the part of gRPC a device plugin uses.

A plugin serves unary calls and one server stream, and makes unary calls to kubelet, all over local
unix sockets without TLS, compression or load balancing. grpcio brings a C core, asyncio and a thread
pool for that (about 75 ms of start-up and 20 MiB of memory a process, measured in ``bench``); this
package speaks the same wire protocol with its own HTTP/2 (``http2.py``) and plain threads. grpcio stays
the reference: the kubelet simulator and the tests call our servers with grpcio's client and serve our
client with grpcio's server.
"""

import logging

# hpack logs every header field it codes at DEBUG (about 25 lines per call): a daemon run with
# --log-level debug would drown its own lines in them. Its warnings and errors still come through.
logging.getLogger("hpack").setLevel(logging.INFO)
