"""Observability of the daemon: Prometheus metrics, liveness/readiness probes and the node report.

* :mod:`.metrics` — ``Metrics``: our own registry; state read from ``Daemon.view()`` per scrape, events
  counted as they happen.
* :mod:`.instruments` — labelled ``Counter`` / ``Histogram`` series and the ``Registry`` a scrape reads;
  :mod:`.process` — the ``process_*`` metrics from ``/proc``.
* :mod:`.exposition` — the Prometheus text format 0.0.4 that ``/metrics`` answers with (prometheus-client
  is not imported at run time).
* :mod:`.interceptor` — ``LatencyInterceptor``: Allocate / GetPreferredAllocation latency per pool.
* :mod:`.probes` — ``alive()`` and ``readiness()``: what ``/healthz`` and ``/readyz`` answer.
* :mod:`.nodelabels` — ``NodeLabeler``: optional vendor / product / count labels on the Node.
* :mod:`.report` — ``build_report()``: the node report in the HCS ``ComputeNode`` device shape.
* :mod:`.http` — ``ObservabilityServer``: ``/metrics``, ``/healthz``, ``/readyz``, ``/report``.
* :mod:`.inspect` — ``hcs-deviceplugin inspect``: the report of a running daemon as a table.

Nothing is imported here so that importing one piece (the daemon needs only ``Metrics``) does not
pull in the HTTP server.
"""
