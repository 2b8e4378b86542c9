# SPDX-License-Identifier: MIT
"""The compilation floor: NVRTC (or nvcc) with nvcc-style options, barecuda's and the
toolkit's headers, and the kernel cache in memory and on disk (barecuda.compiler is
its face, with SourceModule).

Bottom up: diskcache (entries on disk), headers (header stamps), cubin, nvcc_compat,
toolkit (where things are), options (what to compile, for which architecture),
errors (CompileError messages), build (compiling behind the caches).
"""
