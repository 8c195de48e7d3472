"""Operator tools for the NVIDIA backend (read-only)."""
