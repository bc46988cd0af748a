"""A watched model behaves exactly as a bare one: torch.save of the whole module, pickle, deepcopy,
torch.jit.script / save / load and state_dict round trips (issue 19, item 0)."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import PY, SCRIPTS, load

pytestmark = pytest.mark.slow


def test_saved_copied_scripted_model_runs_as_bare(observed, store):
    bare = subprocess.run([PY, str(SCRIPTS / "watched_model.py")], capture_output=True, text=True, timeout=120)
    assert bare.returncode == 0, bare.stderr
    lines = bare.stdout.splitlines()
    assert [ln.split()[0] for ln in lines][:3] == ["trained", "torch.save/load", "pickle"]
    assert lines[-1] == "hooks on copies 0"
    r = observed("watched_model.py")
    assert (r.rc, r.out) == (0, bare.stdout), r
    data = load(store)
    assert data.run.status.value == "completed"
    # the model was watched: its summary is there and its forward was timed in the measured steps
    assert [m["name"] for rank in data.ranks for m in (rec["summary"] for rec in rank.extra["model"])] == ["Net"]
    assert (data.ranks[0].steps["forward_ns"][1:] > 0).all()
