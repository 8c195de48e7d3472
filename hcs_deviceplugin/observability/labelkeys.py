"""Node label keys: the defaults and the apiserver's rule for a key, apart from the labeler.

``run`` checks ``--gpu-type-label-key`` (its default too) while it reads its command line, at every
start; the labeler itself (:mod:`~hcs_deviceplugin.observability.nodelabels`, with the API paths it
patches) is loaded only with ``--node-labels``, which is off by default.
"""

from __future__ import annotations

import re

from hcs_deviceplugin.lazyre import LazyPattern

DEFAULT_LABEL_PREFIX = "hcs.deckhouse.io/"
DEFAULT_GPU_TYPE_KEY = "gpu-type"
MAX_LABEL_VALUE = 63
"""The apiserver's limit for a label value and for the name part of a key."""
_MAX_PREFIX = 253
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = LazyPattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_label_key(key: str) -> bool:
    """Whether the apiserver accepts ``key`` as a label key: ``[prefix/]name``, prefix a DNS subdomain."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > _MAX_PREFIX or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= MAX_LABEL_VALUE and bool(_NAME.match(name))
