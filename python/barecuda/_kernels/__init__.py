# SPDX-License-Identifier: MIT
"""The kernel-templates floor: CUDA C templates filled in per dtype and operation,
compiled by the floor below, launched on whatever arrays expose (barecuda.elementwise,
barecuda.reduction and barecuda.scan are its faces).

Bottom up: cdecl (dtypes and C declarations), vec (vector types), templates,
cache (per-context kernel caches, launch geometry), arrays (the array type the
floor above registers), signature (arguments to launch arguments), elementwise,
elementwise_getters, reduction, reduction_getters, scan.
"""
