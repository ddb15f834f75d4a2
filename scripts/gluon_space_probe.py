"""Time configurations of our Gluon kernel that are not among its variants, at one shape,
beside the variants themselves and SDPA: an exploration of the notes' hypotheses (for
example a persistent grid of two programs per multiprocessor), not a protocol measurement.

Each configuration is a variant of ``gluon_config.VARIANTS`` with some keys changed
(``--config NAME=VARIANT:KEY=VALUE,...``); every one is timed by
``gluon_attention.tune`` (graph mode, the launch's host time left out), and each one that
ran is checked against float64 on fresh inputs (``candidates.check``, the sweep's gate)
after the timing. SDPA's default dispatch is timed the same way. Writes the sealed check
file (kind ``gluon_probe``) ``$OUT/gluon_probe.json`` and prints a table.

    PYTHONPATH=. python3 scripts/gluon_space_probe.py --shape 32,8,512,64 \
        --config persist2=persist:PERSIST=2 --config ovl_persist2=overlap_only:PERSIST=2
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_config(text: str) -> tuple[str, str, dict]:
    """``NAME=VARIANT[:KEY=VALUE,...]`` -> (name, variant, changes); values are ints, or
    True/False."""
    name, sep, rest = text.partition("=")
    if not sep or not name:
        raise ValueError(f"--config must look like NAME=VARIANT[:KEY=VALUE,...]; got {text!r}")
    variant, _, changes = rest.partition(":")
    out = {}
    for item in filter(None, changes.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--config changes must be KEY=VALUE; got {item!r}")
        out[key] = {"True": True, "False": False}.get(value, None)
        if out[key] is None:
            out[key] = int(value)
    return name, variant, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="32,8,512,64", help="B,H,S,D (fp16)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--config", action="append", default=[],
                    help="NAME=VARIANT[:KEY=VALUE,...], repeatable")
    ap.add_argument("--samples", type=int, default=40, help="graph-mode samples each")
    args = ap.parse_args(argv)
    import torch

    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands, gluon_attention as ga, machine, timing
    from attn_analysis.measure import gluon_config as gc
    from attn_analysis.record import checks
    b, h, s, d = (int(x) for x in args.shape.split(","))
    config = Config(b, h, s, d, causal=args.causal)
    space = dict(gc.tuning_space(d))
    for text in args.config:
        name, variant, changes = parse_config(text)
        if variant not in gc.VARIANTS:
            ap.error(f"--config variant must be among {tuple(gc.VARIANTS)}; got {variant!r}")
        try:
            space[name] = gc.full_config({**gc.VARIANTS[variant], **changes}, d)
        except ValueError as exc:
            ap.error(f"--config {text}: {exc}")
    q, k, v = cands.make_inputs(config, "cuda", seed=0)
    sdpa = timing.measure(lambda: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=args.causal), mode="graph", device="cuda", n_samples=args.samples)
    tuned = ga.tune(q, k, v, causal=args.causal, space=space, n_samples=args.samples)
    rows = []
    for name, cfg in space.items():
        ms = tuned["tried_ms"].get(name)
        row = {"name": name, "config": cfg, "graph_ms": ms,
               "sdpa_over_this": sdpa.median_ms / ms if ms else None, "gate": None}
        if ms is not None:
            fn, _ = ga.build(q, k, v, causal=args.causal, config=cfg)
            res = cands.check(cands.Built(fn, {}), config, "cuda", seed=7, name="gluon")
            row["gate"] = {"passed": bool(res.passed), "reason": res.reason,
                           "rel_error": float(res.rel_error), "nonfinite": int(res.nonfinite)}
        rows.append(row)
        print(f"{name:16s} {ms if ms else float('nan'):9.5f} ms  SDPA/this "
              f"{row['sdpa_over_this'] or float('nan'):.3f}  gate "
              f"{row['gate']['passed'] if row['gate'] else '-'}", flush=True)
    print(f"{'sdpa':16s} {sdpa.median_ms:9.5f} ms")
    payload = {"shape": config.key, "samples": args.samples, "sdpa_graph_ms": sdpa.median_ms,
               "rows": rows, "fastest": tuned["variant"], "machine": machine.fingerprint()}
    out = os.path.join(os.environ.get("OUT", "."), "gluon_probe.json")
    checks.write(out, payload, "gluon_probe")
    print(f"wrote {out}")
    return 0 if all(r["gate"] is None or r["gate"]["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
