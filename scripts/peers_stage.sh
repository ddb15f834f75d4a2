#!/usr/bin/env bash
# Stage the peer kernels' packages (requirements-peers.txt) for a GPU machine without network.
#
# Here, from the repository root (needs pip and network):   bash scripts/peers_stage.sh
#   -> .stage/p1 .. .stage/pN: one slice each of a single archive, each small enough to ride
#      in one device call beside the working tree (STAGE_PART_MB, default 52), and
#      .git/info/exclude ignores .stage/.
# On the GPU machine, one call per slice, back to back (name the slice in `carry`):
#   mkdir -p /tmp/stage && cp .stage/pK/* /tmp/stage/
# then, in the call that measures:   source scripts/peers_install.sh
# The two largest packages (the CuTe DSL compiler libraries and FlashInfer, whose sources
# FlashInfer's JIT compiles) travel unpacked and xz-compressed: about 77 MB instead of 154.
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
mkdir -p .git/info; grep -qx "/.stage/" .git/info/exclude 2>/dev/null || echo "/.stage/" >> .git/info/exclude
part_mb=${STAGE_PART_MB:-52}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/whl" "$work/big" "$work/out"
platforms="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
get() {  # wheels for the device's Python 3.12, no dependencies (each is named)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp $platforms --pre -d "$work/whl" "$@"
}
# requirements-peers.txt's pins, and what they need that the device's image lacks.
dsl=$(grep -oP '^nvidia-cutlass-dsl\[cu13\]==\K\S+' requirements-peers.txt)
get $(grep -vE '^\s*(#|$)' requirements-peers.txt | sed 's/\[cu13\]//')
get "nvidia-cutlass-dsl-libs-base==$dsl" "nvidia-cutlass-dsl-libs-core==$dsl" \
    "nvidia-cutlass-dsl-libs-cu13==$dsl" apache-tvm-ffi quack-kernels torch-c-dlpack-ext
for name in nvidia_cutlass_dsl_libs_cu13 flashinfer_python; do
  wheel=$(ls "$work"/whl/${name}-*.whl)
  mkdir -p "$work/big/$name"
  python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$wheel" "$work/big/$name"
  echo "compressing $name (a few minutes on 2 cores)..."
  tar cf - -C "$work/big/$name" . | xz -T0 -9 > "$work/out/$name.tar.xz"
  rm -rf "$wheel" "$work/big/$name"
done
mv "$work"/whl/*.whl "$work/out/"
(cd "$work/out" && ls -l && sha256sum * > SHA256SUMS)
rm -rf .stage && mkdir -p .stage
tar cf - -C "$work/out" . | split -b "${part_mb}M" -d - "$work/slice-"
i=0; for s in "$work"/slice-*; do i=$((i+1)); mkdir -p .stage/p$i; mv "$s" .stage/p$i/; done
du -sh .stage/p*
echo "staged $i slices; on the device: one call per slice, then source scripts/peers_install.sh"
