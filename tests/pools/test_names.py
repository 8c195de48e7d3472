"""Pool names and extended resource names: the same answers kubelet's validation gives."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.pools.names import (
    validate_dns1123_subdomain,
    validate_extended_resource_name,
    validate_pool_name,
)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a", id="one-char"),
        pytest.param("team-a", id="dash"),
        pytest.param("0pool9", id="digits-at-ends"),
        pytest.param("a" * 63, id="63-chars"),
    ],
)
def test_valid_pool_names(name: str) -> None:
    assert validate_pool_name(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("a" * 64, "no more than 63", id="64-chars"),
        pytest.param("Team", "DNS-1123 label", id="upper-case"),
        pytest.param("-a", "DNS-1123 label", id="leading-dash"),
        pytest.param("a-", "DNS-1123 label", id="trailing-dash"),
        pytest.param("a.b", "DNS-1123 label", id="dot"),
        pytest.param("a_b", "DNS-1123 label", id="underscore"),
        pytest.param("a\n", "DNS-1123 label", id="trailing-newline"),
    ],
)
def test_invalid_pool_names(name: str, fragment: str) -> None:
    problem = validate_pool_name(name)
    assert problem is not None
    assert fragment in problem


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("gpu.deckhouse.io/team-a", id="ours"),
        pytest.param("cluster.gpu.deckhouse.io/team-a", id="ours-cluster"),
        pytest.param("nvidia.com/gpu", id="nvidia"),
        pytest.param("example.com/My_Name.v2", id="qualified-name-chars"),
        pytest.param("a/" + "b" * 63, id="name-63"),
        pytest.param("a" * (253 - len("requests.")) + "/x", id="prefix-at-limit-with-requests"),
        pytest.param("requests/x", id="requests-without-dot"),
    ],
)
def test_valid_extended_resource_names(name: str) -> None:
    assert validate_extended_resource_name(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        pytest.param("gpu", "no '/'", id="no-slash"),
        pytest.param("kubernetes.io/gpu", "native", id="native-namespace"),
        pytest.param("foo.kubernetes.io/gpu", "native", id="native-subdomain"),
        pytest.param("requests.example.com/gpu", "must not start with 'requests.'", id="requests-prefix"),
        pytest.param("a/b/c", "more than one '/'", id="two-slashes"),
        pytest.param("/gpu", "not a DNS-1123 subdomain", id="empty-prefix"),
        pytest.param("example.com/", "name part must not be empty", id="empty-name"),
        pytest.param("Example.com/gpu", "DNS-1123 subdomain", id="upper-case-prefix"),
        pytest.param("example.com/" + "b" * 64, "no more than 63", id="name-64"),
        pytest.param("example.com/-gpu", "start and end", id="name-leading-dash"),
        pytest.param("a" * (254 - len("requests.")) + "/x", "no more than 253", id="prefix-over-limit"),
    ],
)
def test_invalid_extended_resource_names(name: str, fragment: str) -> None:
    problem = validate_extended_resource_name(name)
    assert problem is not None
    assert fragment in problem


def test_node_names_are_subdomains() -> None:
    assert validate_dns1123_subdomain("k8s-w1.gpu.example.ru") is None
    assert validate_dns1123_subdomain("k8s_w1") is not None
    assert validate_dns1123_subdomain("a..b") is not None
