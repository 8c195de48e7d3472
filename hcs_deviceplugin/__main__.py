"""The ``hcs-deviceplugin`` command (its console script) and ``python -m hcs_deviceplugin``.

The garbage collector is held back before the command line's own modules load (some 15 young
passes, 2 to 3 ms of every daemon start here): :func:`hcs_deviceplugin.cli.main` keeps it back for
a ``run`` until its pools stream, and turns it on again for any other command (see
:mod:`hcs_deviceplugin.heap`).
"""

from __future__ import annotations

import gc
import sys


def main() -> int:
    """``hcs_deviceplugin.cli.main`` on ``sys.argv``, with the collector held back from here."""
    gc.disable()
    from hcs_deviceplugin.cli import main as run_command

    return run_command()


if __name__ == "__main__":
    sys.exit(main())
