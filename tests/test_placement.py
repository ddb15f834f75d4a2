"""measure.placement on the CPU: a pad of a random size before fresh inputs, and the
placements the probes make one after another as a trial makes them (placed_calls)."""

from __future__ import annotations

import random
import weakref

import pytest

torch = pytest.importorskip("torch")

from attn_analysis.measure import placement  # noqa: E402


def test_pads_are_aligned_and_below_the_maximum():
    rng = random.Random(0)
    sizes = [placement.pad_bytes_for(rng) for _ in range(200)]
    assert all(0 <= s < placement.MAX_PAD_BYTES and s % placement.PAD_ALIGN_BYTES == 0
               for s in sizes)
    assert len(set(sizes)) > 150  # drawn, not fixed


def test_a_placement_holds_its_pad_and_the_inputs_made_after_it():
    drawn = placement.place(3, lambda: (torch.ones(2), torch.zeros(3)), "cpu",
                            random.Random(1))
    assert drawn.index == 3 and drawn.pad.numel() == max(drawn.pad_bytes, 1)
    assert [t.numel() for t in drawn.inputs] == [2, 3]
    assert drawn.as_record() == {"placement": 3, "pad_bytes": drawn.pad_bytes}


def test_placed_calls_run_fn_on_each_placements_fresh_inputs_and_let_them_go():
    made, seen = [], []

    def make_inputs(index):
        # the last placement's tensors are gone before the next is made, though the
        # caller's loop still holds the last call
        assert all(ref() is None for _, ref in made)
        t = torch.full((4,), float(index))
        made.append((index, weakref.ref(t)))
        return (t, t + 1)

    gen = placement.placed_calls(3, make_inputs, lambda a, b: float((a + b).sum()), "cpu",
                                 random.Random(2))
    for index, call in gen:
        seen.append((index, call()))
        kept = call  # a call the caller keeps past its placement
    assert seen == [(0, 4.0), (1, 12.0), (2, 20.0)]
    assert [i for i, _ in made] == [0, 1, 2]
    assert all(ref() is None for _, ref in made)  # every placement's inputs were let go
    with pytest.raises(IndexError):
        kept()  # it has no tensors left to run on
