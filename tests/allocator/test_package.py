"""The package's lazy re-exports: the search is loaded on first use and is the same objects."""

from __future__ import annotations

import pytest

from hcs_deviceplugin import allocation
from hcs_deviceplugin.allocation import policy


@pytest.mark.parametrize("name", ["ReplicaPolicy", "choose_units", "hardware_load"])
def test_the_policy_names_are_the_policy_modules(name: str) -> None:
    assert getattr(allocation, name) is getattr(policy, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'choose'"):
        _ = allocation.choose
