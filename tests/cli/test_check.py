"""`stepscope check`: the CI gate on real benchmark runs in a real git repository."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.cli.check import parse_fraction
from tests.cli.history_repo import bench_at, bench_history, git, make_repo


@pytest.fixture(scope="module")
def history_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """20 commits, commit 12 makes the region 30% slower (large enough to be seen by 4 repeats at one-sided 1%
    on a machine at load 12, where sleep overshoot moves whole runs by several per cent; the power for
    smaller steps is measured by benchmarks/verdicts.py and stated in docs/ci.md).

    4 repeats at the first commit (tag v1.0) and at HEAD, 3 at the first slow commit; 1 elsewhere."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("hist")
    repo, store = tmp / "repo", tmp / "store"
    shas = make_repo(repo, slow_factor=1.30)
    bench_history(mp, repo, store, shas, {0: 4, 12: 3, 19: 4})
    mp.undo()
    return repo, store, shas


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(list(argv))
    return rc, json.loads(capsys.readouterr().out)


def test_check_flags_the_slow_commit(history_store, monkeypatch, capsys) -> None:
    repo, store, shas = history_store
    monkeypatch.chdir(repo)
    rc, doc = run_json(capsys, "check", "--store", str(store), "--baseline", "v1.0", "--max-regression", "5%", "--json")
    assert rc == 1, doc
    assert doc["verdict"] == "regression"
    by = {c["metric"]: c for c in doc["checks"]}
    work = by["region.work.p50_s"]
    assert work["verdict"] == "regressed"
    assert 0.15 < work["change"] < 0.45  # sleep 32.5 ms vs 25 ms plus the same wake-up latency
    assert doc["step"]["first_bad"] == shas[12] and doc["step"]["last_good"] == shas[11]
    assert doc["baseline"] == shas[0] and doc["candidate"] == shas[19]

    capsys.readouterr()
    assert main(["check", "--store", str(store), "--baseline", "v1.0"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and shas[12][:10] in out and "make work 30% slower" in out
    assert f"stepscope diff {doc['step']['last_good_run']} {doc['step']['first_bad_run']}" in out


def test_check_passes_without_a_step(history_store, monkeypatch, capsys) -> None:
    repo, store, shas = history_store
    monkeypatch.chdir(repo)
    # HEAD against the first commit after the step: same code speed, only noise (no creep anchor: 10 commits
    # back lies before the step)
    git(repo, "checkout", "-q", shas[19])
    rc, doc = run_json(capsys, "check", "--store", str(store), "--baseline", shas[12][:8], "--json",
                       "--metric", "step_time", "--max-regression", "25%", "--creep-window", "0")
    assert rc == 0, doc
    assert doc["verdict"] == "pass"


def test_too_few_repeats_cannot_tell(history_store, monkeypatch, capsys) -> None:
    repo, store, shas = history_store
    monkeypatch.chdir(repo)
    git(repo, "checkout", "-q", shas[19])
    # (without the creep check: 10 commits back, before the step, there are enough runs to see the 30% step)
    rc, doc = run_json(capsys, "check", "--store", str(store), "--baseline", shas[5], "--json", "--creep-window", "0")
    assert rc == 2
    assert doc["verdict"] == "cannot_tell"
    assert "the baseline has 1 run(s)" in doc["reason"] and "need 3" in doc["reason"]


def test_a_tolerance_below_what_the_runs_can_see_cannot_tell(history_store, monkeypatch, capsys) -> None:
    """3 runs against 4 cannot see a 0.01% regression (the timer's slack alone moves a run's median sleep step by
    more; at 0.1% a quiet stretch once gave an MDE below it): exit 2 with the MDE, the spread, the runs needed and
    the load, never PASS."""
    repo, store, shas = history_store
    monkeypatch.chdir(repo)
    git(repo, "checkout", "-q", shas[19])
    rc, doc = run_json(capsys, "check", "--store", str(store), "--baseline", shas[12][:8], "--json",
                       "--max-regression", "0.01%", "--creep-window", "0")
    step = next(c for c in doc["checks"] if c["metric"] == "step_time_median_s")
    if step["verdict"] in ("improved", "regressed"):
        # the two commits' runs were made minutes apart, not interleaved: the host's drift between them (a burst of
        # load, or 0.1% on a quiet stretch) can be seen at the gate's level, and is beyond so small a tolerance. The
        # gate then decides on what it saw (exit 0 faster, 1 slower), with an interval excluding 1: never a PASS
        # for a change it could not see
        assert rc == (0 if step["verdict"] == "improved" else 1), step
        assert not step["worse_low"] <= 1.0 <= step["worse_high"] and abs(step["change"]) >= 0.0001, step
        return
    assert rc == 2, step
    assert step["verdict"] == "cannot_tell" and step["mde"] > 0.0001
    assert f"MDE {step['mde']:.0%}" in doc["reason"] and "runs a side" in doc["reason"]
    assert "stepscope bench --repeat" in doc["reason"] and "the candidate's runs:" in doc["reason"]


def test_one_verdict_per_pair_and_links_compare_groups(history_store, monkeypatch, capsys) -> None:
    """The pair of commits around the step is compared as the commits' groups: `check` names the groups, the
    suggested `stepscope diff` and the dashboard's diff page of that pair give the CLI's verdict (one code path:
    same sides, settings and learned noise floor), and the regressions page links the groups' diff page."""
    from stepscope.analyze.diff import Verdict
    from stepscope.cli.dashboarddata import build_site, diff_pairs, render_diff_page
    from stepscope.report.html.diff import HEADLINE_TEXT
    from stepscope.store import open_store

    repo, store, shas = history_store
    monkeypatch.chdir(repo)
    rc, doc = run_json(capsys, "check", "--store", str(store), "--baseline", "v1.0", "--json")
    assert rc == 1, doc
    st = open_store(store)
    try:
        at = {sha: [r.id for r in st.index.runs(order="start_ns") if r.git_commit == sha] for sha in shas}
        good, bad = doc["step"]["last_good_run"], doc["step"]["first_bad_run"]
        assert good.split(",") == at[shas[11]] and bad.split(",") == at[shas[12]] and len(at[shas[12]]) == 3
        rc, cli = run_json(capsys, "diff", good, bad, "--store", str(store), "--json", *GATE_FLAGS)
        assert rc == 0 and cli["runs"] == [at[shas[11]], at[shas[12]]]
        assert page_verdict(render_diff_page(st, good, bad)) == HEADLINE_TEXT[Verdict(cli["verdict"])]
        # the regressions page's pair is the groups' pair too
        assert (good, bad) in diff_pairs(build_site(st, name="tiny"))
    finally:
        st.close()


GATE_FLAGS = ("--confidence", "0.98", "--threshold", "5")
"""`diff` at `check`'s level and default --max-regression (what the regressions page and check suggest)."""


def page_verdict(page: str | None) -> str:
    """The headline verdict a rendered diff page shows."""
    assert page is not None
    shown = re.search(r"experiment vs baseline</[^>]+>\s*<[^>]+>([A-Z ]+)<", page)
    assert shown is not None, page[:3000]
    return shown.group(1)


def test_check_diff_dashboard_and_regressions_page_agree(history_store, monkeypatch, capsys) -> None:
    """One store, one 30% step: `check` (HEAD against v1.0, 4 runs a side), `stepscope diff` of the same two
    groups, the dashboard's diff page of those groups, and the regressions page's row of the step (read from the
    rendered page) with the diff page it links, all call it slower, each with the same numbers where they show
    the same pair."""
    from stepscope.analyze.diff import Verdict
    from stepscope.analyze.runs.historysteps import StepKind
    from stepscope.cli.dashboarddata import build_site, render_diff_page
    from stepscope.report.dashboard.site import regressions_page
    from stepscope.report.html.diff import HEADLINE_TEXT
    from stepscope.store import open_store

    repo, store, shas = history_store
    monkeypatch.chdir(repo)
    git(repo, "checkout", "-q", shas[19])
    rc, doc = run_json(capsys, "check", "--store", str(store), "--baseline", "v1.0", "--creep-window", "0", "--json",
                       "--metric", "step_time")
    assert rc == 1 and doc["verdict"] == "regression", doc
    gate = doc["checks"][0]
    st = open_store(store)
    try:
        at = {sha: ",".join(r.id for r in st.index.runs(order="start_ns") if r.git_commit == sha) for sha in shas}
        base, cand = at[shas[0]], at[shas[19]]
        rc, cli = run_json(capsys, "diff", base, cand, "--store", str(store), "--json", *GATE_FLAGS)
        assert cli["verdict"] == "slower", cli
        head = next(r for r in cli["overview"] if r["key"] == "step_time_median_ns")["change"]
        assert head["ratio"] == pytest.approx(gate["worse"], rel=1e-6)
        # check's interval is diff's with the history's between-commit part and the clustered degrees of freedom:
        # wider or narrower by a little (seen: its low end 0.04% above diff's), never a different verdict
        assert gate["worse_low"] == pytest.approx(head["ci_low"], rel=0.02)
        assert gate["worse_high"] == pytest.approx(head["ci_high"], rel=0.02)
        assert page_verdict(render_diff_page(st, base, cand, threshold=0.05)) == HEADLINE_TEXT[Verdict.SLOWER]

        site = build_site(st, name="tiny", threshold=0.05)
        rows = re.findall(r'<tr data-name="tiny" data-metric="step_time_median_s" data-commit="([0-9a-f]+)" '
                          r'data-kind="(\w+)">.*?</tr>', regressions_page(site), flags=re.S)
        # every step the page lists is the real one (none elsewhere), and the diff page it links says what its row
        # says. Whether the step is listed depends on one run a commit around it (3 commits a side at 98%): at load
        # 12 with the other suite worker it was sometimes "not confirmed", which `check`'s own verdict does not use
        listed = [s for v in site.names for s in v.steps if s.metric == "step_time_median_s"
                  and s.kind is not StepKind.NOT_CONFIRMED]
        assert sorted((s.commit, s.kind.value) for s in listed) == sorted(rows), rows
        for step in listed:
            # placed at the slow commit, or beside it when one noisy run a commit moves the fit (seen under load)
            assert step.commit in shas[11:14] and step.kind is StepKind.REGRESSION, rows
            assert page_verdict(render_diff_page(st, step.last_good_run, step.first_bad_run, threshold=0.05)) \
                == HEADLINE_TEXT[Verdict.SLOWER]
    finally:
        st.close()


def test_unknown_baseline_names_closest(history_store, monkeypatch, capsys) -> None:
    repo, store, _ = history_store
    monkeypatch.chdir(repo)
    capsys.readouterr()
    assert main(["check", "--store", str(store), "--baseline", "v1.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "baseline 'v1.1'" in err and "closest: v1.0" in err
    assert main(["check", "--store", str(store), "--min-repeats", "0"]) == 2
    assert "--min-repeats 0" in capsys.readouterr().err


def test_no_runs_at_head_cannot_tell(tmp_path, monkeypatch, capsys) -> None:
    repo = tmp_path / "repo"
    shas = make_repo(repo, commits=2, slow_at=5, steps=5)
    store = tmp_path / "store"
    assert bench_at(monkeypatch, repo, store, shas[0], 1) == 0
    git(repo, "checkout", "-q", shas[1])
    capsys.readouterr()
    assert main(["check", "--store", str(store)]) == 2
    assert "no runs at the current commit" in capsys.readouterr().err


@pytest.mark.slow
def test_identical_code_passes_at_every_commit(tmp_path, monkeypatch, capsys) -> None:
    """The issue's A/A series: 10 commits of identical speed (only a comment changes), 3 repeats each; `check`
    at every commit with the defaults (window of 3 commits, one-sided 1%, 5% tolerated) never exits 1: 0 where
    the repeats could have seen a 5% regression (MDE <= 5%), 2 ("cannot tell", naming the MDE) where not."""
    repo, store = tmp_path / "repo", tmp_path / "store"
    shas = make_repo(repo, commits=10, slow_at=99)
    for sha in shas:
        assert bench_at(monkeypatch, repo, store, sha, 3) == 0
    codes = []
    for sha in shas[1:]:
        git(repo, "checkout", "-q", sha)
        rc, doc = run_json(capsys, "check", "--store", str(store), "--json")
        codes.append(rc)
        step = next(c for c in doc["checks"] if c["metric"] == "step_time_median_s" and c["against"] == "window")
        assert step["baseline_n"] >= 3 and step["candidate_n"] == 3
        assert step["worse_low"] <= step["worse"] <= step["worse_high"]
        assert rc == (0 if step["mde"] <= 0.05 else 2), doc
    assert 1 not in codes, codes


@pytest.mark.slow
def test_a_step_fails_at_its_commit(tmp_path, monkeypatch, capsys) -> None:
    """A real step at commit 6, 5 repeats a commit: `check` at commit 6 exits 1 and names commit 6. The step is
    50% so that the test holds at any load of a shared machine (20% failed once at load 13); the issue's 5% case
    is run by benchmarks/verdicts.py (study "check"), whose figures say how often it is caught at which load."""
    repo, store = tmp_path / "repo", tmp_path / "store"
    shas = make_repo(repo, commits=7, slow_at=6, slow_factor=1.50)
    for sha in shas[3:]:
        assert bench_at(monkeypatch, repo, store, sha, 5) == 0
    rc, doc = run_json(capsys, "check", "--store", str(store), "--json")
    assert rc == 1, doc
    assert doc["candidate"] == shas[6] and set(doc["baseline_commits"]) == {shas[3], shas[4], shas[5]}
    assert doc["step"]["first_bad"] == shas[6] and doc["step"]["last_good"] == shas[5]
    step = next(c for c in doc["checks"] if c["metric"] == "step_time_median_s")
    assert step["verdict"] == "regressed" and 0.3 < step["change"] < 0.7


def test_parse_fraction() -> None:
    assert parse_fraction("5%") == pytest.approx(0.05)
    assert parse_fraction("0.1") == pytest.approx(0.1)
    from stepscope.errors import UserError

    with pytest.raises(UserError):
        parse_fraction("five")
