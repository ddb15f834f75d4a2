"""How much the extra-heads controls cost at the target, before they are used (GPU).

Usage: python scripts/extra_heads_scan.py [MAX_EXTRA]

For N = 0 .. MAX_EXTRA (default 12) extra heads, builds the ``sdpa_plus<N>h`` computation
(SDPA's default dispatch over the target's 256 heads plus N more, one call) and prints the
profiler's kernels and device time per call beside the plain ``sdpa`` call, so the
controls' sizes (in margins) are known before a calibration run is spent on them. The
calibration itself measures each control's true size again from its own data.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from attn_analysis.configs import TARGET
from attn_analysis.measure import candidates as cands, profiler


def main(max_extra: int = 12) -> int:
    b, h, s, d = TARGET.batch, TARGET.heads, TARGET.seq_len, TARGET.head_dim
    q, k, v = cands.make_inputs(TARGET, "cuda", seed=1, spare_heads=max_extra)
    full = [t.as_strided((1, b * h + max_extra, s, d), (0, s * d, d, 1)) for t in (q, k, v)]
    base = profiler.profile_device_time(lambda: F.scaled_dot_product_attention(q, k, v), 50)
    print(f"sdpa (B{b}, H{h}): {base['device_ms_per_call'] * 1e3:.2f} us per call; kernels "
          + "; ".join(f"{r['name'][:60]} {r['ms_per_call'] * 1e3:.2f} us" for r in base["kernels"]))
    for n in range(max_extra + 1):
        qf, kf, vf = (t[:, :b * h + n] for t in full)
        ev = profiler.profile_device_time(lambda: F.scaled_dot_product_attention(qf, kf, vf), 50)
        ratio = ev["device_ms_per_call"] / base["device_ms_per_call"]
        names = sorted({r["name"][:40] for r in ev["kernels"]})
        print(f"+{n:2d} heads: {ev['device_ms_per_call'] * 1e3:7.2f} us  x{ratio:.4f} "
              f"({(ratio - 1) / 0.02:+.2f} margins)  {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 12))
