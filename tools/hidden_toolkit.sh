#!/usr/bin/env bash
# tools/hidden_toolkit.sh CMD [ARG...]: run CMD as on a machine with the NVIDIA driver and
# no CUDA toolkit.  In a new mount namespace, an empty folder is bind-mounted over every
# /usr/local/cuda* (and $CUDA_HOME, $CUDA_PATH), and those two variables are unset, so
# that NVRTC, its builtins library and the CUDA headers can only come from NVIDIA's pip
# wheels (site-packages/nvidia/...).  The driver (libcuda, e.g. /usr/local/nvidia/lib64)
# stays visible.  Needs unshare(1) and a kernel that allows mount namespaces: as root,
# or as a user through a user namespace (unshare -r).  tests/test_install.py does the
# same for its driver-only installs; .ci/gpu uses this for BARECUDA_HIDDEN_TOOLKIT=1.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 CMD [ARG...]" >&2; exit 2; }
empty=$(mktemp -d /tmp/barecuda-no-toolkit.XXXXXX)
trap 'rm -rf "$empty" "$empty.file"' EXIT
dirs=()
for d in /usr/local/cuda* "${CUDA_HOME:-}" "${CUDA_PATH:-}"; do
  [ -n "$d" ] && [ -d "$d" ] || continue
  r=$(realpath "$d")
  [ "$r" != / ] || continue
  case " ${dirs[*]-} " in *" $r "*) ;; *) dirs+=("$r") ;; esac
done
# The toolkit's programs on PATH outside those folders are covered by an empty file
# without execute permission: an nvcc, ptxas or nvlink that links into them, or a small
# wrapper script that execs them (such as a /usr/local/bin/nvcc of two lines).
files=()
under_hidden() {  # whether real path $1 lies in one of the folders to hide
  local d
  for d in ${dirs[@]+"${dirs[@]}"}; do case $1 in "$d"/*) return 0 ;; esac; done
  return 1
}
patterns=(-e /usr/local/cuda)
for d in ${dirs[@]+"${dirs[@]}"}; do patterns+=(-e "$d"); done
IFS=: read -r -a path_dirs <<<"$PATH"
for p in ${path_dirs[@]+"${path_dirs[@]}"}; do
  [ -d "$p" ] && ! under_hidden "$(realpath "$p")/" || continue
  while IFS= read -r -d '' f; do
    case " ${files[*]-} " in *" $f "*) ;; *) files+=("$f") ;; esac
  done < <(
    # links into the folders, and small text files that name them
    find "$p" -maxdepth 1 -type l -print0 | while IFS= read -r -d '' l; do
      if under_hidden "$(realpath "$l")" && [ -f "$l" ]; then printf '%s\0' "$l"; fi; done
    find "$p" -maxdepth 1 -type f -perm -u+x -size -4k -print0 \
      | xargs -0 -r grep -lIZ -F "${patterns[@]}" 2>/dev/null || true)
done
nofile=$empty.file
: >"$nofile" && chmod 0644 "$nofile"
if [ "$(id -u)" = 0 ]; then ns=(unshare -m --propagation private)
else ns=(unshare -r -m --propagation private); fi
# Inside: mount over each folder, then run the command without the toolkit's variables.
"${ns[@]}" bash -c '
  set -e
  empty=$1 nofile=$2 n=$3; shift 3
  for ((i = 0; i < n; i++)); do mount --bind "$empty" "$1"; shift; done
  n=$1; shift
  for ((i = 0; i < n; i++)); do mount --bind "$nofile" "$1"; shift; done
  unset CUDA_HOME CUDA_PATH
  exec "$@"' hidden "$empty" "$nofile" "${#dirs[@]}" ${dirs[@]+"${dirs[@]}"} \
  "${#files[@]}" ${files[@]+"${files[@]}"} "$@"
