#!/usr/bin/env bash
# On the GPU machine: unpack the slices that scripts/peers_stage.sh made (copied to
# /tmp/stage by earlier calls, the last one possibly still in .stage/) into /tmp/site,
# and export what the peers need. Source it:   source scripts/peers_install.sh
# It returns non-zero, saying which, when a slice is missing or a checksum differs.
peers_install() {
  local stage=/tmp/stage site=/tmp/site unpack=/tmp/stage-unpacked
  mkdir -p "$stage" "$site" "$unpack"
  for d in .stage/p*; do [ -d "$d" ] && cp "$d"/* "$stage"/; done
  ls "$stage"/slice-* >/dev/null 2>&1 || { echo "peers_install: no slices in $stage"; return 1; }
  if [ ! -f "$unpack/SHA256SUMS" ]; then
    cat "$stage"/slice-* | tar xf - -C "$unpack" || { echo "peers_install: slices incomplete"; return 1; }
  fi
  (cd "$unpack" && sha256sum -c --quiet SHA256SUMS) || { echo "peers_install: checksum mismatch"; return 1; }
  if [ ! -f "$site/.installed" ]; then
    # wheels first: pip --target --upgrade replaces a top-level folder that is already
    # there, and the CuTe DSL's libraries unpack into the folder its small wheels own
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "$unpack"/*.whl || { echo "peers_install: pip failed"; return 1; }
    for x in "$unpack"/*.tar.xz; do xz -dc "$x" | tar xf - -C "$site"; done
    touch "$site/.installed"
  fi
  export PYTHONPATH="$PWD:$site:$site/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
  # FlashAttention-4 keeps compiled kernels on disk, so the sweep's later processes load
  # them instead of compiling again; FlashInfer's JIT keeps its own cache (~/.cache).
  export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1
  export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
  echo "peers installed in $site (CUDA_HOME=$CUDA_HOME)"
}
peers_install
