"""Every installed backend refuses an option it does not know before it looks for hardware."""

from __future__ import annotations

from pathlib import Path

import pytest

from hcs_deviceplugin.backend import BackendConfig, BackendOptionError, available_backend_names, load_factory


@pytest.mark.parametrize("name", available_backend_names())
def test_an_unknown_option_is_an_option_error_naming_the_key(name: str, tmp_path: Path) -> None:
    """Raised on an empty host, too: the typo is reported where the hardware is missing as well."""
    factory = load_factory(name)
    with pytest.raises(BackendOptionError, match="noSuchOption"):
        factory(BackendConfig(host_root=tmp_path, options={"noSuchOption": "1"}))
