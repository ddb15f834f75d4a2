"""kernel_after_replay on synthetic cross-check documents: the split by the reference's
last timer, the refusals, and the sentence."""

import pytest

from attn_analysis.chapters import kernel_after_replay as kar
from attn_analysis.configs import TARGET


def _unit(cand, ms, last):
    order = [t for t in ("graph", "per_call", "do_bench", kar.SUSTAINED) if t != last] + [last]
    return dict(shape=TARGET.key, candidate=cand, timer_order=order,
                kernel=dict(device_ms_per_call=ms, n_calls=10))


def _doc(rows):
    """rows: (sdpa ms, its last timer, candidate ms) per process."""
    return dict(processes=[dict(worker=i, units=[_unit("sdpa", s, last),
                                                  _unit("gluon", g, "graph")])
                           for i, (s, last, g) in enumerate(rows)]
                + [dict(worker=9, experiments=True, units=[_unit("sdpa", 1.0, "graph"),
                                                           _unit("gluon", 0.5, "graph")])])


def test_split_follows_the_references_last_timer():
    doc = _doc([(0.0490, kar.SUSTAINED, 0.0460), (0.0470, "do_bench", 0.0465),
                (0.0488, kar.SUSTAINED, 0.0461)])
    groups = kar.split_by_last_timer([doc], "gluon")
    assert len(groups["after"]) == 2 and len(groups["other"]) == 1
    assert groups["other"][0] == pytest.approx(0.0470 / 0.0465)
    assert min(groups["after"]) > max(groups["other"])  # the experiments' process is out


def test_refusals_name_the_parameter():
    with pytest.raises(ValueError, match="`docs`"):
        kar.split_by_last_timer([_doc([])], "gluon")
    with pytest.raises(ValueError, match="`doc`"):
        kar.split_by_last_timer([{"no": "processes"}], "gluon")
    with pytest.raises(ValueError, match="`groups`"):
        kar.kernel_gap_sentence({"after": [], "other": []}, [1.01])


def test_sentence_counts_and_says_which_group_is_nearer():
    text = kar.kernel_gap_sentence({"after": [1.06, 1.04], "other": [1.01, 1.02, 1.015]},
                                   [1.011, 1.016])
    assert text.startswith("The checks profiled SDPA's kernel right after its sustained "
                           "replay in 2 of 5 processes.")
    assert "1.050×; elsewhere 1.015×" in text and "nearer the checks elsewhere" in text
    assert all(len(s.split()) < 25 for s in text.split(". "))
    only = kar.kernel_gap_sentence({"after": [], "other": [1.02]}, [1.011])
    assert only.endswith("The protocol runs' kernel level is 1.011×.")
