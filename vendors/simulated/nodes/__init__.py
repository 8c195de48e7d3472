"""Example node descriptions (``builtin:<name>``); a package only so that its YAML ships in the wheel."""
