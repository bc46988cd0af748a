"""analyze/run/blind.py on hooks records as a damaged or hand-edited record file may hold them: a record with a
field of the wrong type is ignored (never a KeyError or TypeError in the summary), the last record of a
framework wins, and the warning's wording is built from the records' own values."""

from __future__ import annotations

from stepscope.analyze.run.blind import advice, blind_text, hook_notes
from stepscope.model.run import RankStream
from stepscope.model.tables import CommTable, MetricTable, RankData, RegionTable, SampleTable, StepTable


def _rank(hooks: list[dict[str, object]]) -> RankData:
    stream = RankStream(rank=0, local_rank=0, world_size=1, role=None, pid=1, host="h", start_ns=0, end_ns=1)
    return RankData(stream=stream, steps=StepTable.empty(), regions=RegionTable.empty(),
                    samples=SampleTable.from_batches([]), metrics=MetricTable.empty(), comm=CommTable.empty(),
                    extra={"hooks": hooks})


GOOD: dict[str, object] = {"kind": "hooks", "framework": "tensorflow", "version": "2.21.0",
                           "installed": ["tf.data", "tf.function"], "refused": {}}


def test_damaged_hooks_records_are_ignored() -> None:
    damaged: list[dict[str, object]] = [
        {"kind": "hooks"}, {**GOOD, "framework": 3}, {**GOOD, "version": 2.21}, {**GOOD, "installed": "tf.data"},
        {**GOOD, "refused": ["tf.function"]}, {**GOOD, "framework": "jax", "installed": None},
    ]
    assert hook_notes(_rank(damaged)) == []
    assert [n["framework"] for n in hook_notes(_rank([*damaged, GOOD]))] == ["tensorflow"]


def test_named_in_a_fixed_order_and_the_last_record_wins() -> None:
    keras: dict[str, object] = {**GOOD, "framework": "keras", "version": None, "installed": [],
                                "refused": {"fit": "KeyError: 'fit'"}}
    notes = hook_notes(_rank([keras, {**GOOD, "installed": []}, GOOD]))
    assert [n["framework"] for n in notes] == ["tensorflow", "keras"]
    assert notes[0]["installed"] == ["tf.data", "tf.function"]
    text = blind_text(notes)
    assert text == ("tensorflow 2.21.0 (hooks installed: tf.data, tf.function; refused: none) and keras (version "
                    "unknown) (hooks installed: none; refused: fit: KeyError: 'fit') were imported but no training "
                    f"step was seen — {advice(['keras'])}")


def test_a_long_reason_is_cut_to_one_short_line() -> None:
    note: dict[str, object] = {**GOOD, "refused": {"tf.data": "line one\n" + "x" * 500}}
    text = blind_text(hook_notes(_rank([note])))
    reason = text.split("refused: tf.data: ")[1].split(")")[0]
    assert "\n" not in text and reason.startswith("line one x") and len(reason) == 160 and reason.endswith("…")
