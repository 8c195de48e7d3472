"""Name rules that Kubernetes enforces, checked before kubelet gets a chance to reject them.

Kubelet refuses a device plugin registration whose resource name is not a valid extended resource
name, and it does so only in its own log. Checking the same rule here turns that into a config error
with a field path. The checks mirror the Go sources (``IsExtendedResourceName``, ``IsQualifiedName``,
``IsDNS1123Label``/``Subdomain``) so a name we accept is a name kubelet accepts, and vice versa.
Each function returns an error string, or ``None`` when the value is valid.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL)
_DNS1123_SUBDOMAIN_RE = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

# k8s.io/kubernetes/pkg/apis/core: ResourceDefaultNamespacePrefix, DefaultResourceRequestsPrefix.
_NATIVE_NAMESPACE = "kubernetes.io/"
_REQUESTS_PREFIX = "requests."


def validate_dns1123_label(value: str) -> str | None:
    """A DNS-1123 label: ≤ 63 characters of ``[a-z0-9-]``, alphanumeric at both ends."""
    if not value:
        return "must not be empty"
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        return f"must be no more than {DNS1123_LABEL_MAX_LENGTH} characters, got {len(value)}"
    if not _DNS1123_LABEL_RE.fullmatch(value):
        return (
            f"{value!r} is not a DNS-1123 label: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return None


def validate_dns1123_subdomain(value: str) -> str | None:
    """A DNS-1123 subdomain (Kubernetes node names, resource prefixes): dot-separated labels, ≤ 253."""
    if not value:
        return "must not be empty"
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        return f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters, got {len(value)}"
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        return (
            f"{value!r} is not a DNS-1123 subdomain: dot-separated lower-case labels of "
            "letters, digits and '-'"
        )
    return None


def validate_pool_name(name: str) -> str | None:
    """Pool names are DNS-1123 labels: they become the name part of a resource name and a socket name."""
    return validate_dns1123_label(name)


def validate_qualified_name(value: str) -> str | None:
    """``IsQualifiedName``: an optional DNS-1123 subdomain prefix and ``/``, then a ≤ 63 name part."""
    parts = value.split("/")
    if len(parts) > 2:
        return f"{value!r} has more than one '/'; expected an optional DNS subdomain prefix and a name"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "prefix part must not be empty"
        problem = validate_dns1123_subdomain(prefix)
        if problem is not None:
            return f"prefix part {problem}"
    if not name:
        return "name part must not be empty"
    if len(name) > QUALIFIED_NAME_MAX_LENGTH:
        return f"name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} characters, got {len(name)}"
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        return (
            f"name part {name!r} must consist of letters, digits, '-', '_' or '.', "
            "and start and end with a letter or digit"
        )
    return None


def validate_extended_resource_name(name: str) -> str | None:
    """Exactly kubelet's ``IsExtendedResourceName`` (KUBELET.md §2), with the reason spelled out.

    Rejected when it has no ``/`` or contains ``kubernetes.io/`` (both make it a native resource), when
    it starts with ``requests.``, or when ``"requests." + name`` is not a qualified name — which is
    how the 253-character prefix limit comes to include the ``requests.`` that quota adds.
    """
    if "/" not in name:
        return f"{name!r} has no '/': an extended resource name is '<domain>/<name>'"
    if _NATIVE_NAMESPACE in name:
        return f"{name!r} is in the native 'kubernetes.io/' namespace"
    if name.startswith(_REQUESTS_PREFIX):
        return f"{name!r} must not start with {_REQUESTS_PREFIX!r}"
    problem = validate_qualified_name(_REQUESTS_PREFIX + name)
    if problem is not None:
        return f"{name!r} is not valid once quota prefixes it with {_REQUESTS_PREFIX!r}: {problem}"
    return None
