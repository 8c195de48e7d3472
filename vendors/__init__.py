"""Vendor backends. Each sub-package is one vendor and registers itself as an entry point."""
