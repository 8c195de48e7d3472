"""The ``hcs_deviceplugin.pools`` package loads its public names on first use (see its docstring):
each one still resolves, to the very object its module defines, and a name it does not have is an
AttributeError as for any module."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from hcs_deviceplugin import pools


@pytest.mark.parametrize("name", pools.__all__)
def test_every_public_name_resolves_to_its_module_s_object(name: str) -> None:
    home = pools._HOME[name]
    assert getattr(pools, name) is getattr(importlib.import_module(home), name)


def test_the_table_covers_exactly_the_public_names() -> None:
    assert sorted(pools._HOME) == sorted(pools.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        pools.no_such_name  # noqa: B018


def test_a_submodule_not_yet_imported_still_imports_from_the_package() -> None:
    """``from hcs_deviceplugin.pools import validate`` (the CLI's form) asks the package's
    ``__getattr__`` first; its AttributeError must send Python on to import the submodule."""
    code = "from hcs_deviceplugin.pools import validate; print(validate.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "hcs_deviceplugin.pools.validate"
