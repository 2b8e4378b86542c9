#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Print the include directory of NVIDIA's CUDA runtime wheel, for meson.build.

The toolkit-free build takes cuda.h from the ``nvidia-cuda-runtime`` wheel that
pyproject.toml lists among the build requirements (CUDA 13: site-packages/
nvidia/cu13/include; the CUDA 12 wheel ``nvidia-cuda-runtime-cu12``: site-
packages/nvidia/cuda_runtime/include).  Every sys.path entry of the Python that
runs this (the build environment's) is searched, CUDA 13's layout first.  Prints
the first directory holding cuda.h and exits 0; exits 1, saying what it searched
on stderr, when there is none.
"""
import os
import sys

LAYOUTS = (("cu13", "include"), ("cuda_runtime", "include"))


def candidates():
    for entry in sys.path:
        root = os.path.join(entry or os.getcwd(), "nvidia")
        if os.path.isdir(root):
            for parts in LAYOUTS:
                yield os.path.join(root, *parts)


def main():
    searched = []
    for d in candidates():
        if os.path.isfile(os.path.join(d, "cuda.h")):
            print(os.path.abspath(d))
            return 0
        searched.append(d)
    where = "\n  ".join(searched) or "(no sys.path entry holds an nvidia/ package)"
    sys.stderr.write("cuda.h was not found in NVIDIA's wheels; searched:\n  " + where + "\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
