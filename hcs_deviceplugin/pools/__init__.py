"""Pool configuration: formats in, one validated :class:`~hcs_deviceplugin.model.PoolSet` out.

This package is the daemon's config API (STYLE.md): nothing else imports raw YAML. Formats
(:mod:`.native`) turn text into ``Pool`` values and know nothing about where the text came from;
sources (:mod:`.directory`) know where text comes from and when it changes, and merge what the
formats give them. Errors are values (:mod:`.errors`) so sources can keep, compare and report them.
"""

from hcs_deviceplugin.pools.conflicts import DeviceKey, device_key, find_conflicts, selectors_overlap
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.pools.document import Syntax, load_document
from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
from hcs_deviceplugin.pools.names import validate_extended_resource_name, validate_pool_name
from hcs_deviceplugin.pools.native import parse_native, parse_native_data

__all__ = [
    "ConfigError",
    "ConfigErrors",
    "DeviceKey",
    "DirectoryPoolSource",
    "Syntax",
    "device_key",
    "find_conflicts",
    "load_document",
    "parse_native",
    "parse_native_data",
    "selectors_overlap",
    "validate_extended_resource_name",
    "validate_pool_name",
]
