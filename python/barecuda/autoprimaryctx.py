# SPDX-License-Identifier: MIT
"""Import for its effect: make a device's primary context current.

Same as ``barecuda.autoinit`` (barecuda's default context is the primary one);
kept for programs written for ``pycuda.autoprimaryctx``.
"""

from barecuda.autoinit import context, device  # noqa: F401
