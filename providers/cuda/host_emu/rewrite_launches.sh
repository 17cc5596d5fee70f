#!/usr/bin/env bash
# rewrite_launches.sh IN.cu OUT.cc: the .cu file with every kernel<<<config>>>(args) launch written as
# ::cuda_emu::Launch(config).Run("kernel", kernel, args) for the emulated device (cuda_emu.h). Fails if a
# launch is left (one split over lines, which the pattern cannot see).
set -euo pipefail
in="$1"
out="$2"
{
  echo "// Generated from $in by providers/cuda/host_emu/rewrite_launches.sh: kernel launches for the emulated device."
  echo "#line 1 \"$in\""
  sed -E \
    -e 's/([A-Za-z_][A-Za-z0-9_]*(<[^<>;]*>)?)<<<(.*)>>>\(\s*\)/::cuda_emu::Launch(\3).Run("\1", \1)/g' \
    -e 's/([A-Za-z_][A-Za-z0-9_]*(<[^<>;]*>)?)<<<(.*)>>>\(/::cuda_emu::Launch(\3).Run("\1", \1, /g' "$in"
} > "$out"
if grep -n '<<<\|>>>' "$out" >&2; then
  echo "rewrite_launches.sh: $in has a launch the rewrite did not handle (above)" >&2
  exit 1
fi
