#!/usr/bin/env bash
# The launch rewrite: template kernels, no arguments, casts in arguments, and a launch split over lines
# refused.
set -euo pipefail
script="providers/cuda/host_emu/rewrite_launches.sh"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat > "$dir/a.cu" <<'CU'
  Kern<<<Blocks(n), kThreads, 0, stream>>>(x, y);
    case 1: CastKernel<From, float><<<Blocks(n), kThreads, 0, stream>>>(x, static_cast<float*>(y), n); break;
  Tick<<<1, 1, 0, s>>>();
CU
bash "$script" "$dir/a.cu" "$dir/a.cc"
expect() {
  if ! grep -qF -- "$1" "$dir/a.cc"; then
    echo "missing: $1"; cat "$dir/a.cc"; exit 1
  fi
}
expect '::cuda_emu::Launch(Blocks(n), kThreads, 0, stream).Run("Kern", Kern, x, y);'
expect '::cuda_emu::Launch(Blocks(n), kThreads, 0, stream).Run("CastKernel<From, float>", CastKernel<From, float>, x, static_cast<float*>(y), n); break;'
expect '::cuda_emu::Launch(1, 1, 0, s).Run("Tick", Tick);'
printf 'Kern<<<Blocks(n),\n  kThreads>>>(x);\n' > "$dir/b.cu"
if bash "$script" "$dir/b.cu" "$dir/b.cc" 2>/dev/null; then
  echo "a launch split over lines was not refused"; exit 1
fi
echo "rewrite_launches: ok"
