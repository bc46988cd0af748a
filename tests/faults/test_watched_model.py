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


def user_hook(module, args, out):  # type: ignore[no-untyped-def]
    return None


def test_user_hooks_travel_and_ours_never_do(tmp_path):
    """In one process: the user's own hook on the watched model is kept by pickle and deepcopy, ours
    is in neither, TorchScript compiles none of ours, and the session leaves plain dictionaries."""
    import copy
    import pickle
    from collections import OrderedDict

    import torch

    import stepscope

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    model.register_forward_hook(user_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with stepscope.session(store=str(tmp_path / "store")):
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        assert "_compiled_call_impl" in vars(model)  # ours is there (the model's call slot, modelcall.py) ...
        assert list(model._forward_hooks.values()) == [user_hook] and not model._forward_pre_hooks
        for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
            assert "_compiled_call_impl" not in vars(clone)  # ... and never in a copy
            assert type(clone._forward_hooks) is OrderedDict
            assert [h.__name__ for h in clone._forward_hooks.values()] == ["user_hook"]
            assert len(clone._forward_pre_hooks) == 0 and len(clone._forward_hooks_always_called) == 0
    assert "_compiled_call_impl" not in vars(model)
    assert type(model._forward_hooks) is OrderedDict and list(model._forward_hooks.values()) == [user_hook]
    assert len(model._forward_pre_hooks) == 0
    bare = torch.nn.Sequential(torch.nn.Linear(4, 4))
    with stepscope.session(store=str(tmp_path / "store")):
        opt = torch.optim.SGD(bare.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            bare(torch.randn(2, 4)).sum().backward()
            opt.step()
        scripted = torch.jit.script(bare)  # would fail compiling a hook of ours
        assert torch.equal(scripted(torch.ones(1, 4)), bare(torch.ones(1, 4)))
