# SPDX-License-Identifier: MIT
"""Import for its effect: make a context current, as ``pycuda.autoinit`` does.

The context is the primary context of the device named by ``CUDA_DEVICE``, else
of the first device that works; ``device`` and ``context`` are exported, and the
context is popped and released when the interpreter exits.
"""

import atexit

from barecuda import driver as _drv
from barecuda._core.contexts import make_default_context as _make

context = _make()
device = context.device


def _cleanup():
    try:
        if _drv.Context.get_current() == context:
            _drv.Context.pop()
    except _drv.Error:
        pass
    context.detach()


atexit.register(_cleanup)
