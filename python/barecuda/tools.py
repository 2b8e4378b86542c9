# SPDX-License-Identifier: MIT
"""Helpers in PyCUDA's ``pycuda.tools`` style."""

import os

from barecuda import driver as _drv


def make_default_context(ctx_maker=None):
    """Make a context current on this thread and return it.

    Tries the device named by ``CUDA_DEVICE``, else every device in order, and
    returns the first context ``ctx_maker(device)`` gives (default: the device's
    primary context), pushed on this thread's stack.  Raises ``driver.Error`` with
    each device's failure when none works.
    """
    if ctx_maker is None:
        def ctx_maker(dev):
            return dev.retain_primary_context()

    _drv.init()
    wanted = os.environ.get("CUDA_DEVICE")
    if wanted is not None:
        try:
            ordinals = [int(wanted)]
        except ValueError:
            raise _drv.LogicError(f"CUDA_DEVICE={wanted!r} is not a device ordinal") from None
    else:
        ordinals = range(_drv.Device.count())
    failures = []
    for ordinal in ordinals:
        try:
            ctx = ctx_maker(_drv.Device(ordinal))
        except _drv.Error as exc:
            failures.append(f"device {ordinal}: {exc}")
            continue
        if _drv.Context.get_current() != ctx:
            ctx.push()
        return ctx
    raise _drv.RuntimeError("no device could be given a context: " + ("; ".join(failures) or "no devices"))


def bitlog2(n):
    """Position of the highest set bit of the positive int n (floor(log2(n)))."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"bitlog2() takes an int, not {type(n).__name__}")
    if n <= 0:
        raise ValueError(f"bitlog2() needs a positive int, got {n}")
    return n.bit_length() - 1
