#!/usr/bin/env bash
# On the GPU machine: unpack the slices that scripts/peers_stage.sh made (copied to
# /tmp/stage by earlier calls, the last one possibly still in .stage/) and install each of
# its three wheel folders into a target folder of its own:
#   /tmp/site            main: FlashAttention-4 b36 + CuTe DSL, cuDNN frontend, xFormers,
#                        FlashAttention-3 (tokenspeed-fa3, fa3-fwd), einops
#   /tmp/site-fa4b18     flash-attn-4 4.0.0b18 (+ its quack-kernels), put in front of
#                        /tmp/site for sdpa_fa4 (PEERS_PYTHONPATH_FA4B18)
#   /tmp/site-xformers   xFormers alone (PEERS_PYTHONPATH_XFORMERS)
# Source it:   source scripts/peers_install.sh
# It exports PYTHONPATH for the main environment and the two others as variables; it
# returns non-zero, saying which, when a slice is missing or a checksum differs.
peers_install() {
  local stage=/tmp/stage unpack=/tmp/stage-unpacked env target
  mkdir -p "$stage" "$unpack"
  for d in .stage/p*; do [ -d "$d" ] && cp "$d"/* "$stage"/; done
  ls "$stage"/slice-* >/dev/null 2>&1 || { echo "peers_install: no slices in $stage"; return 1; }
  if [ ! -f "$unpack/SHA256SUMS" ]; then
    cat "$stage"/slice-* | tar xf - -C "$unpack" || { echo "peers_install: slices incomplete ($(ls "$stage" | tr '\n' ' '))"; return 1; }
  fi
  (cd "$unpack" && sha256sum -c --quiet SHA256SUMS) || { echo "peers_install: checksum mismatch"; return 1; }
  for env in main fa4b18 xformers; do
    target=/tmp/site; [ "$env" = main ] || target=/tmp/site-$env
    if [ ! -f "$target/.installed" ]; then
      # one pip call per folder: pip assembles all wheels in a scratch folder first, so the
      # CuTe DSL's library wheel and the small wheel that owns its folder merge
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$target" "$unpack/$env"/*.whl || { echo "peers_install: pip failed ($env)"; return 1; }
      touch "$target/.installed"
    fi
  done
  local dsl=/tmp/site/nvidia_cutlass_dsl/dsl_packages
  export PYTHONPATH="$PWD:/tmp/site:$dsl"
  export PEERS_PYTHONPATH_FA4B18="$PWD:/tmp/site-fa4b18:/tmp/site:$dsl"
  export PEERS_PYTHONPATH_XFORMERS="$PWD:/tmp/site-xformers"
  # FlashAttention-4 keeps compiled kernels on disk, so the sweep's later processes load
  # them instead of compiling again; FlashInfer's JIT keeps its own cache (~/.cache).
  export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1
  export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
  echo "peers installed in /tmp/site, /tmp/site-fa4b18, /tmp/site-xformers (CUDA_HOME=$CUDA_HOME)"
}
peers_install
