#!/usr/bin/env bash
# Fills the git-ignored folders a call to the lent GPU machine carries (that machine has
# no network and starts bare each lease), so that one call can run everything:
#   .whl/      meson-python and its needs (the offline build in .ci/gpu); in cu13/, the
#              CCCL wheel (.ci/gpu's toolkit-hidden run); nbclient,
#              nbformat and ipykernel with their needs (the tutorial notebooks, and
#              tests/test_ipython.py); pytools, mako, cgen, codepy and their needs
#              (PyCUDA's tests and examples under .ci/pycuda)
#   .clients/  kernel_tuner, grunnur and their needs, their sdists (their tests), and a
#              copy of ../shared/reference (PyCUDA's sdist, to build it there): .ci/clients
#   .pycuda/   PyCUDA's test/ and examples/ from a mirror the search tool's fetch made
#              (--pycuda GITDIR): .ci/pycuda renames their imports there, nothing of it
#              is committed
# Usage: tools/gpu_carry.sh [--pycuda GITDIR] [--no-clients]
# then, e.g.: run(command="bash .ci/gpu", carry=[".whl", ".pycuda"])
#             run(command="bash .ci/gpu ...; CLIENTS_PYCUDA=build bash .ci/clients",
#                 carry=[".whl", ".clients"])
# Prints each folder's size: a call carries at most 64 MiB with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
pycuda_git="" clients=1
while [ $# -gt 0 ]; do
  case $1 in
    --pycuda) pycuda_git=$2; shift 2 ;;
    --no-clients) clients=0; shift ;;
    *) echo "usage: $0 [--pycuda GITDIR] [--no-clients]" >&2; exit 2 ;;
  esac
done
for d in .whl .clients .pycuda; do
  git check-ignore -q "$d/x" || { echo "$d is not ignored by git: add it to .gitignore or .git/info/exclude" >&2; exit 2; }
done

# The GPU machine's Python (shared/GPU.md): CPython 3.12, manylinux x86-64.
plat=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform any)
dl() { python3 -m pip download -q --disable-pip-version-check "${plat[@]}" "$@"; }

mkdir -p .whl
dl -d .whl meson-python pyproject-metadata packaging
dl -d .whl nbclient nbformat ipykernel
# uvloop: `await stream` under uvloop (tests/test_aio*.py), which the GPU image lacks
dl -d .whl --no-deps uvloop
dl -d .whl --no-deps pytools platformdirs siphash24 typing_extensions mako markupsafe codepy
# cgen is published as a source distribution only: a pure-Python wheel of it, built here
python3 -m pip wheel -q --disable-pip-version-check --no-deps -w .whl cgen
# barecuda[cu13]'s CCCL wheel, which the GPU image's venv lacks (PyTorch's wheels bring
# NVRTC, the runtime's headers and cuRAND, not CCCL): .ci/gpu's toolkit-hidden run
# installs it into a folder of its own (pip --target), as a user adding it later would.
# In a subfolder: .ci/pycuda installs every wheel of .whl/ itself.
mkdir -p .whl/cu13
dl -d .whl/cu13 --no-deps "nvidia-cuda-cccl==13.0.*"
# What the GPU image has already would only shadow its own copy in .ci/pycuda's
# private folder (it installs every wheel of .whl/ there): numpy and meson stay out.
rm -f .whl/numpy-*.whl .whl/meson-[0-9]*.whl

if [ "$clients" = 1 ]; then
  mkdir -p .clients/sdist
  dl -d .clients --no-deps kernel_tuner==1.5.0 grunnur==0.6.0 pytest-grunnur \
    jsonschema jsonschema-specifications referencing rpds-py pymoo moocore autograd cma \
    alive_progress about-time==4.2.1 graphemeu==0.7.2 deprecated cffi pycparser \
    python-constraint2 xmltodict mako pytools platformdirs siphash24
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary=:all: \
    -d .clients/sdist kernel_tuner==1.5.0 grunnur==0.6.0
  [ -d ../shared/reference ] && rm -rf .clients/reference && cp -r ../shared/reference .clients/reference
fi

if [ -n "$pycuda_git" ]; then
  rm -rf .pycuda && mkdir -p .pycuda
  git --git-dir="$pycuda_git" archive HEAD test examples | tar -x -C .pycuda
fi

du -sh .whl .clients .pycuda 2>/dev/null || true
