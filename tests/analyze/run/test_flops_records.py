"""analyze/run/flops.py: a FLOP record without the step it counted is damaged and ignored, as counted_steps
ignores it, not read by the summary (a mutated record file once ended in KeyError: 'step')."""

from __future__ import annotations

from stepscope.analyze.run.flops import _well_formed


def test_a_flop_record_needs_its_step_as_an_int() -> None:
    rec = {"kind": "flops", "step": 3, "flops": 1.5e9, "by_dtype": {"float32": 1.5e9}, "step_wall_ns": 2_000_000}
    assert _well_formed(rec)
    assert not _well_formed({k: v for k, v in rec.items() if k != "step"})
    assert not _well_formed({**rec, "step": "3"})
    assert not _well_formed({**rec, "step": None})


def test_a_damaged_by_dtype_gives_no_precision_rather_than_an_error() -> None:
    # the record fuzz test once ended in TypeError: float(None) from a mutated count
    from stepscope.analyze.run.flops import precision_of

    assert precision_of({"float32": None}, tf32=False) is None
    assert precision_of({"float32": None, "bfloat16": 4}, tf32=False) == "bf16"
    assert precision_of({"float32": "many", "float16": True}, tf32=True) is None
    assert precision_of([1, 2], tf32=False) is None  # type: ignore[arg-type]
    assert precision_of({"float32": 10, "bfloat16": 3}, tf32=True) == "tf32"
