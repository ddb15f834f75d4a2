"""The variance appendix's robustness section: the figure of the speedups against the SM
clock (the numbers come from :mod:`attn_analysis.analyse.robustness`)."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from ..present import figure_style
from ..analyse import robustness as rb

__all__ = ["LEVEL_COLOURS", "clock_figure"]

LEVEL_COLOURS = {"call": "#1b9e77", "kernel": "#7570b3"}


def clock_figure(pairs, slopes: dict) -> Figure:
    """One panel per GPU model: the speedup about each comparison's mean against the SM
    clock of the placement pair, binned (:func:`rb.clock_profile`; marker area: pairs), with
    the fitted slope of ``slopes[(model, level)]`` (a :class:`rb.ClockSlope` or None) as a
    line; each panel's title names the model and the runs, so the device is on the figure."""
    with matplotlib.rc_context(figure_style.STYLE):
        models = sorted(pairs["model"].unique())
        fig = Figure(figsize=(figure_style.PAGE_WIDTH_IN, 2.4), layout="constrained", dpi=110)
        axes = fig.subplots(1, len(models), sharey=True, squeeze=False)[0]
        for ax, model in zip(axes, models):
            for lv, colour in LEVEL_COLOURS.items():
                d = pairs[(pairs["model"] == model) & (pairs["level"] == lv)]
                if d.empty:
                    continue
                prof = rb.clock_profile(d)
                ax.scatter(prof["clock_mhz"] + 15, prof["speedup_pct"], color=colour,
                           s=4 + 60 * np.sqrt(prof["pairs"] / prof["pairs"].max()),
                           label=f"{lv} level (bin mean; area: pairs)")
                s = slopes.get((model, lv))
                if s is not None:
                    xs = np.array([s.clock_min, s.clock_max])
                    ax.plot(xs, s.pct_per_100mhz * (xs - d["clock_mhz"].mean()) / 100, "-",
                            color=colour, lw=1)
            ax.axhline(0, color="0.6", lw=0.6)
            runs = ", ".join(sorted(set(pairs.loc[pairs["model"] == model, "run"])))
            ax.set_title(f"{model}: runs {runs}", fontsize=7.5, wrap=True)
            ax.set_xlabel("SM clock of the placement pair (MHz)")
        axes[0].set_ylabel("speedup about its\ncomparison's mean (%)")
        figure_style._legend_below(fig, axes)
    return fig
