# SPDX-License-Identifier: MIT
"""The driver-objects floor, Python half: what barecuda.driver and barecuda.tools
add to the C extension's objects (the header enums, CUDA arrays from NumPy data,
memory pools, device data, default contexts and per-context memoization).

Imports only barecuda._driver and the standard library/NumPy: the floors above
(compilation, kernel templates, arrays, tools) import it, never the reverse.
"""
