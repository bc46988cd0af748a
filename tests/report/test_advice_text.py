"""The advice renderers never print a saving or an evidence value that was not measured as a number ("up to
0 ms", "0 s over the run", "nan"): they say "not measurable"."""

from __future__ import annotations

from stepscope.analyze.advisor import Finding
from stepscope.report.advice import NOT_MEASURABLE, evidence_text, finding_view, saving_text
from stepscope.report.terminal import console


def _finding(per_step: float | None, total: float | None, bound: bool = True, **ev: float | int | str) -> Finding:
    return Finding(rule_id="r", title="T", explanation="E", threshold="X", evidence=dict(ev), suggestion="S",
                   saving_s_per_step=per_step, saving_s_total=total, saving_basis="b", source="steps",
                   measured_from="from the step timings of the 7 measured steps (warm-up excluded)",
                   saving_is_upper_bound=bound)


def _text(f: Finding) -> str:
    c = console(width=200)
    with c.capture() as cap:
        c.print(finding_view(f, 1))
    return cap.get()


def test_zero_or_nan_savings_are_not_measurable() -> None:
    for per_step, total in ((0.0, 0.0), (float("nan"), None), (None, 0.0), (0.0, None)):
        text = saving_text(_finding(per_step, total))
        assert text == f"saving {NOT_MEASURABLE}", (per_step, total, text)


def test_a_per_step_saving_without_a_total_does_not_print_zero_over_the_run() -> None:
    text = saving_text(_finding(0.004, None))
    assert text == f"could save up to 4 ms per step (over the run: {NOT_MEASURABLE})"
    assert saving_text(_finding(0.004, 0.028)) == "could save up to 4 ms per step (0.028 s over the run)"
    assert saving_text(_finding(None, 1.5)) == "could save up to 1.5 s per run"
    assert saving_text(_finding(None, None)) == "saving not estimated"


def test_an_estimate_reads_about_and_only_a_bound_reads_up_to() -> None:
    assert saving_text(_finding(0.004, 0.028, bound=False)) == "could save about 4 ms per step (0.028 s over the run)"
    assert saving_text(_finding(None, 1.5, bound=False)) == "could save about 1.5 s per run"


def test_each_rule_calls_its_saving_a_bound_exactly_when_its_basis_says_so() -> None:
    import ast
    from pathlib import Path

    import stepscope.analyze.advisor as advisor

    seen = 0
    for path in Path(advisor.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "finding"):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            basis = kw.get("basis")
            if not isinstance(basis, ast.Constant):
                continue  # a basis built at run time (its rule's tests check its words)
            bound = "upper_bound" in kw and ast.literal_eval(kw["upper_bound"]) is True
            assert bound == ("upper bound" in str(basis.value)), (path.name, node.lineno, basis.value)
            seen += bound
    assert seen == 5  # gpu idle, gpu utilisation, launch-bound, input-bound, comm overlap


def test_unmeasured_evidence_reads_not_measurable() -> None:
    assert evidence_text(float("nan")) == NOT_MEASURABLE
    assert evidence_text(0.25) == "0.25" and evidence_text(3) == "3"
    out = _text(_finding(0.0, 0.0, data_wait_share_low=float("nan"), data_wait_share=0.4))
    assert "nan" not in out and "+0" not in out and " 0 ms" not in out
    assert f"data_wait_share_low={NOT_MEASURABLE}" in out


def test_the_evidence_names_its_measurement() -> None:
    out = _text(_finding(0.004, 0.028, data_wait_share=0.4))
    assert "evidence (from the step timings of the 7 measured steps (warm-up excluded)): data_wait_share=0.4" in out
