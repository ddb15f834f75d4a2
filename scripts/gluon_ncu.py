"""Launch each Gluon variant once at the target, then SDPA's default dispatch once, for ncu.

Usage, on an sm90 GPU from the repository root (a script; ``ncu -k`` picks the attention
kernels out of the launches, ``scripts/ncu_summary.py`` reads the raw export; ``--help``
prints this)::

    ncu --set full -k regex:'_gluon_attn_fwd|fprop' -o $OUT/gluon_ncu \\
        python3 scripts/gluon_ncu.py plain,overlap_only,warp_spec,pingpong,fa3,persist \\
        > $OUT/ncu_log.txt 2>&1
    ncu --import $OUT/gluon_ncu.ncu-rep --page raw --csv > $OUT/ncu_raw.csv
    python3 scripts/ncu_summary.py $OUT/ncu_raw.csv "$(grep -o 'NCU_ORDER [0-9]* [a-z_0-9]*' \\
        $OUT/ncu_log.txt | cut -d' ' -f3 | paste -sd,)"

Each variant is launched once (``gluon_attention.build`` compiles it and makes that launch),
on the same fresh random inputs as SDPA's; ``NCU_ORDER i name`` lines give the launch order,
which is the order of the kernels in the export. Exploration beside the protocol: the
numbers the book reports come from the sweep.
"""

from __future__ import annotations

import argparse
import sys

import torch

from attn_analysis.configs import TARGET
from attn_analysis.measure import candidates as cands
from attn_analysis.measure import gluon_attention as ga
from attn_analysis.measure import gluon_config as gc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("variants", help=f"comma-separated, among {', '.join(gc.VARIANTS)}")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(gc.VARIANTS))
    if unknown:
        ap.error(f"variants must be among {tuple(gc.VARIANTS)}; got {unknown}")
    q, k, v = cands.make_inputs(TARGET, "cuda", seed=11)
    for i, name in enumerate(variants):
        ga.build(q, k, v, causal=TARGET.causal, config=gc.config_for(TARGET.head_dim, name))
        print(f"NCU_ORDER {i} {name}", flush=True)
    torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=TARGET.causal)
    torch.cuda.synchronize()
    print(f"NCU_ORDER {len(variants)} sdpa", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
