"""benchmarks/compat.py, the version matrix's runner, without building a venv: its sets come from constraints.txt,
a user's mistake is one line, and each test's outcome is read from the JUnit XML of a real pytest run."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from benchmarks.compat import ROOT, TESTS, beyond_claims, claimed, outcomes, table, version_sets

RUNNER = ROOT / "benchmarks" / "compat.py"


def _runner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUNNER), *args], capture_output=True, text=True, timeout=60)


def test_pinned_sets_follow_constraints_txt() -> None:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        spec = line.split("#")[0].strip()
        if "==" in spec:
            name, version = spec.split("==")
            pins[name.strip()] = version.strip()
    sets = {vs.name: vs.requirements for vs in version_sets()}
    assert f"torch=={pins['torch']}" in sets["torch-pinned"]
    for name in ("tensorflow-cpu", "keras", "jax", "jaxlib", "optax"):
        assert f"{name}=={pins[name]}" in sets["frameworks-pinned"]
    assert "torch" in sets["torch-newest"]


def test_oldest_sets_are_the_lower_ends_of_pyprojects_claims() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    lows = {}
    for req in extras["torch"] + extras["tensorflow"] + extras["jax"]:
        name, rest = req.split(">=")
        lows[name] = rest.split(",")[0]
    sets = {vs.name: vs.requirements for vs in version_sets()}
    assert f"torch=={lows['torch']}" in sets["torch-oldest"]
    for name in ("tensorflow-cpu", "keras", "jax", "optax"):
        assert f"{name}=={lows[name]}" in sets["frameworks-oldest"]
    assert f"jaxlib=={lows['jax']}" in sets["frameworks-oldest"]
    assert "torch==2.0.1" in {vs.name: vs.requirements for vs in version_sets("2.0.1")}["torch-oldest"]


def test_a_release_above_the_claim_is_named() -> None:
    high = {c: h for c, (_, h) in claimed().items()}
    major, minor, _ = (int(x) for x in high["torch"].split("."))
    newer = f"{major}.{minor + 1}.0+cu130"
    notes = beyond_claims({"torch": newer, "keras": high["keras"], "jax": None})
    claim = high["torch"]
    assert notes == [f"torch {newer} is newer than pyproject claims (<={claim}): if it passed, extend the claim"]


def test_mistakes_are_one_line(tmp_path: Path) -> None:
    unknown = _runner("--sets", "torch-oldest,torch-ancient")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1, unknown.stderr
    assert "torch-ancient" in unknown.stderr and "Traceback" not in unknown.stderr
    inside = _runner("--sets", "torch-oldest", "--venvs", str(ROOT / "compat-venvs"))
    assert inside.returncode == 2 and inside.stderr.count("\n") == 1, inside.stderr
    assert "inside the repository" in inside.stderr and not (ROOT / "compat-venvs").exists()
    listed = _runner("--list")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == len(version_sets())


def test_outcomes_from_a_real_junit_file(tmp_path: Path) -> None:
    (tmp_path / "test_three.py").write_text(
        "import pytest\n"
        "def test_torch_loop_counts_exactly():\n    assert 1 + 1 == 2\n"
        "def test_keras_fit_counts_exactly():\n    assert [1] == [2], 'counts differ'\n"
        "def test_jax_api_counts_exactly():\n    pytest.skip('jax is not installed in this environment')\n")
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o",
                    "addopts=", f"--junitxml={junit}", str(tmp_path / "test_three.py")], capture_output=True,
                   text=True, timeout=120, cwd=tmp_path)
    res = outcomes(junit)
    assert res["test_torch_loop_counts_exactly"] == ("pass", "")
    fit = res["test_keras_fit_counts_exactly"]
    assert fit[0] == "FAIL" and "counts differ" in fit[1]
    assert res["test_jax_api_counts_exactly"][0] == "skip"
    assert "not installed" in res["test_jax_api_counts_exactly"][1]
    rows: list[dict[str, object]] = [{"set": "s", "versions": {"torch": "2.1.2"}, "outcomes": res}]
    last = table(rows).splitlines()[-1].split(" | ")
    # set, torch, tensorflow-cpu, keras, jax, then one cell per reference in TESTS' order
    assert last[:5] == ["s", "2.1.2", "—", "—", "—"]
    assert last[5:] == [res.get(t, ("—", ""))[0] for t in TESTS] == ["pass", "FAIL", "—", "skip"]
