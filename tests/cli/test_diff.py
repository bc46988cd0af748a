"""`stepscope diff` on real runs: an A/A pair of single runs is never faster or slower, a controlled 2x
slowdown is slower on one run and with repeats (interval above 1, headline = row), bad input -> one line; and
on the fixture trace pair."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.conftest import built_once

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "diff_train.py"
PAIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces" / "a100_8rank_diff"


def _record(folder: Path) -> None:
    """The six runs, interleaved, into folder/store; their run ids by name into folder/runs.json."""
    store = folder / "store"
    common = ["--wait", "0.02", "--width", "8", "--steps", "60"]
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    ids: dict[str, str] = {}
    for i in (1, 2, 3):
        for name, extra in (("base", common), ("slow", [*common, "--slow-pct", "100"])):
            before = set((store / "runs").iterdir()) if (store / "runs").exists() else set()
            p = subprocess.run([sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet",
                                "--sample-interval", "0.2", "--flops-per-step", "0", "--", sys.executable,
                                str(SCRIPT), *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, timeout=300)
            assert p.returncode == 0, (name, p.stderr[-2000:])
            (new,) = set((store / "runs").iterdir()) - before
            ids[f"{name}{i}"] = new.name
    (folder / "runs.json").write_text(json.dumps(ids))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real runs in one store, interleaved: base1, slow1, base2, slow2, base3, slow3 (the unchanged script
    three times, and the same script sleeping 100% of each step's own time: a controlled 2x slowdown). Steps
    are dominated by a 20 ms wait, as a GPU-bound step's host is, so that CPU contention from other jobs on a
    shared machine cannot make a 2x slowdown look like anything else. Recorded once per test session
    (built_once): an xdist worker that gets some of these tests while another records them waits for the
    same store instead of recording six more runs."""
    folder = built_once(tmp_path_factory, "diffruns", _record)
    store = folder / "store"
    out = {name: store / "runs" / run_id for name, run_id in json.loads((folder / "runs.json").read_text()).items()}
    out["store"] = store
    return out


def _diff_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    assert main(["diff", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _row(doc: dict, key: str) -> dict:  # type: ignore[type-arg]
    return next(r for r in doc["overview"] if r["key"] == key)


def _ids(runs: dict[str, Path], *names: str) -> str:
    return ",".join(runs[n].name for n in names)


def _single_2x_verdicts(capsys: pytest.CaptureFixture[str], runs: dict[str, Path], *store: str) -> list[str]:
    """The step-time verdict of each one-run-a-side pair (base_i, slow_i), checked against the documented rule,
    recomputed here from the floor the report states: "slower" exactly when the change clears
    z(99%) * sigma * sqrt(2) plus the load allowance (docs/diff.md), else "inconclusive" naming the floor or the
    load. A floor learned from noisy repeats in the store (or inflated for a noisy host) can honestly be wider than
    a 2x change. With the stated default floor (no store) a 2x change clears it unless the load changed, so there
    at least one of the three pairs must be called: a rule that hid a real 2x at equal load fails here."""
    from scipy import stats

    out, quiet = [], []
    for i in (1, 2, 3):
        a, b = (runs[f"base{i}"].name, runs[f"slow{i}"].name) if store else (str(runs[f"base{i}"]),
                                                                               str(runs[f"slow{i}"]))
        doc = _diff_json(capsys, a, b, *store)
        ch = _row(doc, "step_time_median_ns")["change"]
        fl = doc["noise_floor"]
        spread = fl["sigma_log"] * math.sqrt(2.0)
        z = stats.norm.ppf(0.995) if fl["df"] is None else stats.t.ppf(0.995, fl["df"])
        need = z * spread + fl["load_factor"] * max(abs(fl["load_shift_log"]) - spread, 0.0)
        assert math.log1p(ch["mde"]) == pytest.approx(need, rel=1e-6), (i, ch, fl)
        moved = math.log(ch["experiment"] / ch["baseline"])
        assert moved > math.log(1.5), (i, ch)  # the runs really are about 2x apart
        if moved > need:
            assert ch["verdict"] == "slower", (i, ch, fl)
        else:
            assert ch["verdict"] == "inconclusive", (i, ch, fl)
            assert ch["note"] == fl["load_reason"] or (
                fl["load_reason"] is None and "within the between-run noise floor" in ch["note"]), (i, ch, fl)
        out.append(ch["verdict"])
        quiet.append(fl["sigma_log"] <= 0.1)
    if not store and any(quiet):
        # (a run on a saturated host or with very irregular steps raises the floor past 2x: docs/diff.md)
        assert "slower" in [v for v, q in zip(out, quiet, strict=True) if q], (out, quiet)
    return out


@pytest.mark.slow
def test_single_aa_pair_is_never_faster_or_slower(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # one run a side: the steps inside a run say nothing about the next run's level, so an A/A pair is at most
    # "inconclusive" (or "no change"), whatever the load of the machine
    for a, b in (("base1", "base2"), ("base2", "base3"), ("base3", "base1")):
        doc = _diff_json(capsys, str(runs[a]), str(runs[b]))
        step = _row(doc, "step_time_median_ns")
        assert step["change"]["verdict"] in ("inconclusive", "no_significant_change"), step
        assert step["change"]["method"] == "noise_floor" and step["change"]["ci_low"] is None
        assert doc["verdict"] == step["change"]["verdict"]
        assert doc["noise_floor"]["source"]
    assert doc["schema"] == "stepscope.diff/2"
    assert not doc["context"]  # same command, model, data loader


@pytest.mark.slow
def test_noise_floor_is_learned_from_repeats_in_the_store(runs: dict[str, Path],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    store = str(runs["store"])
    doc = _diff_json(capsys, runs["base1"].name, runs["slow1"].name, "--store", store)
    # base2 and base3 are repeats of the baseline's command, slow2 and slow3 of the experiment's: 2 groups of 2
    # (the compared runs themselves left out)
    floor = doc["noise_floor"]
    assert "learned from 4 runs" in floor["source"] and "2 df" in floor["source"], floor
    assert _row(doc, "step_time_median_ns")["change"]["noise_floor"] == floor["source"]
    _single_2x_verdicts(capsys, runs, "--store", store)
    # only one other run of the same command: nothing to learn, the quiet-host spread (or what the runs measured
    # above it) is used and said
    doc = _diff_json(capsys, runs["base1"].name, runs["base2"].name, "--store", store)
    assert "no repeats of this command in the store" in doc["noise_floor"]["source"]


@pytest.mark.slow
def test_twice_as_slow_is_slower_on_one_run_and_with_repeats(runs: dict[str, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.store.rundir import read_run

    _single_2x_verdicts(capsys, runs)
    store = str(runs["store"])
    doc = _diff_json(capsys, _ids(runs, "base1", "base2", "base3"), _ids(runs, "slow1", "slow2", "slow3"),
                     "--store", store)
    step = _row(doc, "step_time_median_ns")
    ch = step["change"]
    assert ch["verdict"] == "slower" and ch["method"] == "welch_log" and ch["n_baseline"] == 3
    assert 1.0 < ch["ci_low"] <= ch["ratio"] <= ch["ci_high"]
    # the printed numbers are the tested ones: geometric means of each run's median step time, from the records
    assert step["baseline"] == ch["baseline"] and step["experiment"] == ch["experiment"]
    assert 1.6 < ch["ratio"] < 2.4
    # headline and rows agree: the headline is the step-time row's verdict
    assert doc["verdict"] == "slower" and doc["findings"][0]["kind"] == "step_time"
    assert doc["findings"][0]["verdict"] == "slower"
    parts = [f for f in doc["findings"] if f["kind"] in ("phase", "region")]
    assert any(p["name"] == "extra" for p in parts[:2])
    row = next(r for r in doc["breakdown"] if r["name"] == "extra")
    assert row["presence"] == "only in experiment"
    slow = read_run(runs["slow1"]).ranks[0]
    stored_mean = slow.regions["duration_ns"][slow.regions.mask_of("extra")].mean()
    assert 0.5 * stored_mean < row["experiment_ns"] < 2 * stored_mean
    assert any(c["key"] == "command" for c in doc["context"])


@pytest.mark.slow
def test_repeated_aa_is_no_significant_change(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diff_json(capsys, _ids(runs, "base1", "base2"), _ids(runs, "base3", "base1"), "--store",
                     str(runs["store"]))
    assert doc["verdict"] in ("no_significant_change", "inconclusive")
    assert doc["verdict"] == _row(doc, "step_time_median_ns")["change"]["verdict"]


@pytest.mark.slow
def test_exit_code_says_what_the_verdict_says(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """`--exit-code`: 1 slower, 2 cannot tell, 0 otherwise, like `check`; without it a diff exits 0. One A/A run a
    side cannot tell; a repeated A/A whose pairs could not show the threshold cannot tell either (it says how many
    runs would), and 2x with 3 runs a side is slower."""
    store = str(runs["store"])
    for a, b in (("base1", "base2"), ("base1,base2", "base3,base1"), ("base1,base2,base3", "slow1,slow2,slow3")):
        a, b = ",".join(runs[n].name for n in a.split(",")), ",".join(runs[n].name for n in b.split(","))
        doc = _diff_json(capsys, a, b, "--store", store)
        rc = main(["diff", a, b, "--store", store, "--json", "--exit-code"])
        capsys.readouterr()
        assert rc == {"slower": 1, "inconclusive": 2}.get(doc["verdict"], 0), (rc, doc["verdict"])
        ch = _row(doc, "step_time_median_ns")["change"]
        if doc["verdict"] == "no_significant_change":
            assert ch["mde"] <= 0.02, ch  # "no change" only where a 2% change would have shown
        elif doc["verdict"] == "inconclusive" and ch["method"] == "welch_log":
            assert ch["mde"] > 0.02 and "stepscope bench --repeat" in ch["note"], ch
    assert doc["verdict"] == "slower" and rc == 1
    first = _diff_json(capsys, runs["base1"].name, runs["base2"].name, "--store", store)
    assert first["verdict"] == "inconclusive"
    assert main(["diff", runs["base1"].name, runs["base2"].name, "--store", store, "--exit-code"]) == 2
    assert "INCONCLUSIVE" in capsys.readouterr().out


@pytest.mark.slow
def test_headline_and_rows_agree_on_every_pair(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Every ordered pair of the stored runs, singly and as repeats: the headline is the step-time row's verdict,
    the step-time finding says the same, and base-vs-base (A/A) is never faster or slower."""
    from stepscope.analyze.diff import DiffSide, Verdict, diff
    from stepscope.store.rundir import read_run

    data = {n: read_run(p) for n, p in runs.items() if n != "store"}
    sides = [[n] for n in data] + [["base1", "base2"], ["base2", "base3"], ["slow1", "slow2"], ["slow2", "slow3"]]
    for a in sides:
        for b in sides:
            if a == b:
                continue
            d = diff(DiffSide("a", data=data[a[0]], repeats=tuple(data[n] for n in a[1:])),
                     DiffSide("b", data=data[b[0]], repeats=tuple(data[n] for n in b[1:])))
            row = next(r for r in d.overview if r.key == "step_time_median_ns")
            assert row.change is not None and d.verdict is row.change.verdict
            assert row.baseline == row.change.baseline and row.experiment == row.change.experiment
            finding = next(f for f in d.findings if f.kind == "step_time")
            assert finding.verdict is row.change.verdict
            if all(n.startswith("base") for n in a + b):
                assert d.verdict in (Verdict.NO_SIGNIFICANT_CHANGE, Verdict.INCONCLUSIVE), (a, b, row.change)


@pytest.mark.slow
def test_terminal_names_the_change_first(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", _ids(runs, "base1", "base2", "base3"), _ids(runs, "slow1", "slow2", "slow3"),
                 "--store", str(runs["store"]), "--width", "160"]) == 0
    out = capsys.readouterr().out
    assert out.index("measurement quality") < out.index("SLOWER") if "measurement quality" in out else True
    assert out.index("SLOWER") < out.index("region extra") < out.index("Overview")
    assert "3 v 3 run(s)" in out and "only in experiment" in out and "Traceback" not in out


@pytest.mark.slow
def test_run_with_itself(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diff_json(capsys, str(runs["base1"]), str(runs["base1"]))
    assert any("with itself" in m for m in doc["messages"])
    base = str(runs["base1"])
    assert main(["diff", base, base, "--html", base]) == 2  # a folder: cannot be written
    err = capsys.readouterr().err
    assert err.startswith("stepscope: error: cannot write") and len(err.strip().splitlines()) == 1
    assert all(r["delta"] in (0, None) for r in doc["overview"])
    assert _row(doc, "step_time_median_ns")["change"]["verdict"] == "inconclusive"


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["diff", str(empty), str(empty), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "no .json or .json.gz trace" in err and len(err.strip().splitlines()) == 1
    assert main(["diff", "nosuchrun", "latest", "--store", str(tmp_path / "s")]) != 0
    err = capsys.readouterr().err
    assert err.startswith("stepscope: error:") and "Traceback" not in err
    assert main(["diff", str(empty), str(empty), "--threshold", "-1"]) == 2


def test_fixture_trace_pair(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diff_json(capsys, str(PAIR / "control_rank3.json.gz"), str(PAIR / "test_rank3.json.gz"))
    assert doc["baseline"]["kind"] == "traces" and doc["world"] == "per_rank_and_totals"
    assert any("world sizes differ (8 vs 2)" in m for m in doc["messages"])
    setup = {f["name"]: f for f in doc["findings"] if f["kind"] == "setup"}
    assert "A100" in setup["device"]["baseline_text"] and "V100" in setup["device"]["experiment_text"]
    assert doc["findings"][0]["kind"] == "step_time"
    kernels = doc["traces"]["kernels"]
    assert abs(kernels[0]["delta"]) == max(abs(k["delta"]) for k in kernels)


CODE_SCRIPT = """import time, stepscope
from helper import WAIT
for i in stepscope.steps(range(6)):
    time.sleep(WAIT)
"""


@pytest.mark.slow
def test_setup_code_is_verified_without_git(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Outside git, "same code" is said only when the content hashes of the script and of the Python files it
    imported from the working directory agree; an edited imported file is named."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(CODE_SCRIPT)
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}

    def run(wait: str) -> str:
        (work / "helper.py").write_text(f"WAIT = {wait}\n")
        p = subprocess.run([sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet",
                            "--sample-interval", "0", "--", sys.executable, "train.py"], cwd=work, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        return max((store / "runs").iterdir(), key=lambda d: d.stat().st_mtime_ns).name

    a, b, c = run("0.003"), run("0.003"), run("0.004")
    same = _diff_json(capsys, a, b, "--store", str(store))
    assert not [x for x in same["context"] if x["key"] == "code"], same["context"]
    changed = _diff_json(capsys, a, c, "--store", str(store))
    code = next(x for x in changed["context"] if x["key"] == "code")
    assert code["experiment"] == "code changed (file helper.py)"
    assert main(["diff", a, b, "--store", str(store), "--width", "200"]) == 0
    assert "code (verified)" in capsys.readouterr().out
