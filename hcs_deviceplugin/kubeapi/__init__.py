"""A small Kubernetes API client on the standard library: exactly the calls the daemon makes.

The ``kubernetes`` package costs about 40 MiB of resident memory once its watch runs (models for every
API group, urllib3, oauthlib, dateutil...) to do what this package does with ``http.client`` and
``ssl``: find the apiserver and our credentials (:mod:`.config`), send JSON requests and stream a
list or watch body (:mod:`.client`), and keep a rotating service-account token fresh
(:mod:`.tokens`). Callers name API paths themselves (:func:`.paths.path_of`); there are no generated models.

Nothing is imported here, so that a module needing only :mod:`.paths` (the CLI's import of the node
labeler, say) does not load ``ssl`` and ``http.client`` with it.
"""
