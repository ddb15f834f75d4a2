#!/usr/bin/env bash
# Stage the peer kernels' packages for a GPU machine without network (torch 2.11, CUDA 13,
# Python 3.12 there).
#
# Here, from the repository root (needs pip and network):   bash scripts/peers_stage.sh
#   -> .stage/p1 .. .stage/pN: one slice each of a single uncompressed tar of the wheels
#      (raw split, no xz: compressing the CuTe DSL libraries took many minutes on 2 cores
#      and saved little), each at most STAGE_PART_MB MiB (default 52, about 54.5 MB) so a
#      slice rides in one device call beside the working tree; .git/info/exclude ignores
#      .stage/.
# Three environments, each a folder of wheels in the tar (scripts/peers_install.sh installs
# each into its own target folder):
#   main     requirements-peers.txt's FlashAttention-4 (and the CuTe DSL it compiles with),
#            the cuDNN frontend, xFormers, FlashAttention-3's binary wheel (tokenspeed-fa3)
#            and its forward-only fallback (fa3-fwd), einops (FA3's interface imports it);
#   fa4b18   flash-attn-4 4.0.0b18, the last release whose _flash_attn_fwd returns the
#            (out, lse) pair torch 2.11's FA4 wrapper unpacks, with the quack-kernels of its
#            time; it goes in front of main on PYTHONPATH (same CuTe DSL);
#   xformers xFormers alone, so its own reason for not loading is seen without
#            flash-attn-4 beside it.
# FlashInfer (62 MB) makes the set one slice longer; it is staged only with
# STAGE_FLASHINFER=1.
# On the GPU machine, one call per slice but the last, back to back (name the slice in
# `carry`):   mkdir -p /tmp/stage && cp .stage/pK/* /tmp/stage/
# then, in the call that measures (carrying the last slice):   source scripts/peers_install.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
mkdir -p .git/info; grep -qx "/.stage/" .git/info/exclude 2>/dev/null || echo "/.stage/" >> .git/info/exclude
part_mb=${STAGE_PART_MB:-52}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out/main" "$work/out/fa4b18" "$work/out/xformers"
platforms="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
get() {  # get DIR SPEC...: wheels for the device's Python 3.12, no dependencies (each is named)
  local dir=$1; shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp $platforms --pre -d "$work/out/$dir" "$@"
}
pin() { grep -oP "^$1(\[\w+\])?==\K\S+" requirements-peers.txt; }
dsl=$(pin nvidia-cutlass-dsl)
get main "flash-attn-4==$(pin flash-attn-4)" "nvidia-cutlass-dsl==$dsl" \
    "nvidia-cutlass-dsl-libs-base==$dsl" "nvidia-cutlass-dsl-libs-core==$dsl" \
    "nvidia-cutlass-dsl-libs-cu13==$dsl" apache-tvm-ffi quack-kernels torch-c-dlpack-ext \
    "nvidia-cudnn-frontend==$(pin nvidia-cudnn-frontend)" "xformers==$(pin xformers)" \
    "tokenspeed-fa3==$(pin tokenspeed-fa3)" "fa3-fwd==$(pin fa3-fwd)" einops
if [ "${STAGE_FLASHINFER:-0}" = 1 ]; then
  get main "flashinfer-python==$(pin flashinfer-python)"
fi
get fa4b18 "flash-attn-4==$(pin '# sdpa_fa4: flash-attn-4')" "quack-kernels==$(pin '# sdpa_fa4: quack-kernels')"
get xformers "xformers==$(pin xformers)"
(cd "$work/out" && ls -lR && find . -name '*.whl' -exec sha256sum {} + > SHA256SUMS)
rm -rf .stage && mkdir -p .stage
tar cf - -C "$work/out" . | split -b "${part_mb}M" -d - "$work/slice-"
i=0; for s in "$work"/slice-*; do i=$((i+1)); mkdir -p .stage/p$i; mv "$s" .stage/p$i/; done
du -sh .stage/p*
echo "staged $i slices; on the device: one call per slice but the last, then source scripts/peers_install.sh"
