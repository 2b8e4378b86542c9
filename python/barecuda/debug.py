# SPDX-License-Identifier: MIT
"""Run a script with device debugging on, as ``python -m pycuda.debug`` does.

    python -m barecuda.debug SCRIPT [ARGS...]

Turns on ``driver.set_debugging()`` (kernels compiled afterwards carry device debug
information, ``-G``, for cuda-gdb and compute-sanitizer) and runs SCRIPT as
``__main__`` with ``sys.argv`` set to ``[SCRIPT, ARGS...]``.  Importing this module
outside ``-m`` only turns debugging on.
"""

import os
import runpy
import sys

from barecuda import driver as _drv

_drv.set_debugging()


def main(argv=None):
    """Run the script named by argv[0] with debugging on; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m barecuda.debug SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script = args[0]
    if not os.path.isfile(script):
        print(f"barecuda.debug: {script} does not exist", file=sys.stderr)
        return 1
    sys.argv = args
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
