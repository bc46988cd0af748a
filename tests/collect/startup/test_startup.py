"""What an observed process does at its start: nothing of stepscope until it imports a framework (or stepscope),
and then everything as before. Real children under a real `stepscope run`; no timing here (benchmarks/startup.py
measures the cost)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import PY, load, stepscope_cmd

HEAVY = ("stepscope", "numpy", "psutil", "torch", "orjson", "rich")
LOADED = f"sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})"
TRAIN = """
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range({n}):
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
"""


def _observe(tmp_path: Path, code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(code))
    full = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    full.update(env or {})
    r = subprocess.run(stepscope_cmd("run", "--store", str(tmp_path / "store"), "--quiet", "--sample-interval", "0",
                                     "--", PY, str(script)), capture_output=True, text=True, timeout=300,
                       env=full, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _first_json(out: str) -> object:
    return json.loads(out.splitlines()[0])


def test_a_process_that_imports_no_framework_loads_nothing_of_stepscope(tmp_path: Path) -> None:
    r = _observe(tmp_path, f"import sys, json\nprint(json.dumps({LOADED}))\n")
    assert _first_json(r.stdout) == []
    data = load(tmp_path / "store")
    assert data.run.status.value == "completed" and len(data.ranks) == 0


def test_torch_imported_after_start_is_observed_exactly(tmp_path: Path) -> None:
    """The recorder starts at torch's import: the hooks are in before the first step, every step counted."""
    r = _observe(tmp_path, f"import sys, json\nprint(json.dumps({LOADED}))\n" + TRAIN.format(n=7))
    assert _first_json(r.stdout) == []
    data = load(tmp_path / "store")
    assert len(data.ranks) == 1 and len(data.ranks[0].steps) == 7


def test_importing_torch_observed_loads_nothing_of_torch_a_bare_import_does_not(tmp_path: Path) -> None:
    """The recorder and its torch hooks add stepscope's modules (and standard-library ones) to ``import torch``,
    never more of torch or another package: torch._dynamo with sympy, for one, is seconds of CPU in every
    process that imports torch."""
    code = "import json, sys\nimport torch\nprint(json.dumps(sorted(sys.modules)))\n"
    bare = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0, bare.stderr[-3000:]
    observed = _observe(tmp_path, code)
    added = set(_first_json(observed.stdout)) - set(json.loads(bare.stdout))  # type: ignore[arg-type]
    # the injected boot module; and what torch imports at a DataLoader's first batch, which the loader hook's
    # install-time self-check iterates (the training's own first batch imports it in a bare run)
    expected = {"sitecustomize", "torch.profiler._cupti_monitor"}
    foreign = sorted(m for m in added - expected if m.split(".")[0] != "stepscope" and m.split(".")[0] not in
                     sys.stdlib_module_names)
    assert foreign == [], f"{len(foreign)} modules more than a bare `import torch`: {foreign[:12]}"


def test_the_api_without_a_framework_still_records(tmp_path: Path) -> None:
    """A script that imports only stepscope: the recorder starts right after stepscope's own import."""
    _observe(tmp_path, """
        import stepscope
        for _ in stepscope.steps(range(6)):
            pass
        """)
    data = load(tmp_path / "store")
    assert len(data.ranks) == 1 and len(data.ranks[0].steps) == 6


def test_a_lookup_of_stepscope_before_its_import_still_records(tmp_path: Path) -> None:
    """``importlib.util.find_spec`` (a library checking what is installed) asks the finders without importing:
    the recorder must still start at the real import that follows."""
    _observe(tmp_path, """
        import importlib.util
        assert importlib.util.find_spec("stepscope") is not None
        import stepscope
        for _ in stepscope.steps(range(4)):
            pass
        """)
    data = load(tmp_path / "store")
    assert len(data.ranks) == 1 and len(data.ranks[0].steps) == 4


def test_a_user_sitecustomize_that_imports_torch_is_chained_and_observed(tmp_path: Path) -> None:
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import torch\nprint('user sitecustomize ran')\n")
    r = _observe(tmp_path, TRAIN.format(n=5), env={"PYTHONPATH": str(site)})
    assert r.stdout.splitlines()[0] == "user sitecustomize ran"
    data = load(tmp_path / "store")
    assert len(data.ranks) == 1 and len(data.ranks[0].steps) == 5


def test_the_watched_packages_are_those_the_recorder_attaches_to(tmp_path: Path) -> None:
    """sitecustomize starts the recorder at the first import under WATCHED; ``attach`` adds a watcher per
    framework: a framework watched by ``attach`` but missing from WATCHED would be imported unobserved."""
    probe = f"""
        import json, sys
        from pathlib import Path
        from stepscope.collect.startup.bootstrap import attach
        from stepscope.collect.core.options import Options
        from stepscope.collect.startup.postimport import PostImportWatcher
        from stepscope.collect.core.session import Session
        attach(Session(Path({str(tmp_path)!r}), "probe", Options()))
        print(json.dumps(sorted({{w.name.split(".")[0] for w in sys.meta_path if isinstance(w, PostImportWatcher)}})))
        """
    r = subprocess.run([PY, "-c", textwrap.dedent(probe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    from stepscope.collect.startup.launch import BOOT_DIR

    spec = importlib.util.spec_from_file_location("stepscope_boot_sitecustomize", BOOT_DIR / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)  # no STEPSCOPE_RUN_DIR in this process: it only chains and defines
    assert json.loads(r.stdout) == sorted(site.WATCHED)


def test_run_loads_only_its_own_subcommand() -> None:
    """`stepscope run` imports run's module, not those of the other subcommands (serve, trace, ls, ...)."""
    code = ("import sys, json\nfrom stepscope.cli import load_commands\n"
            "names = [c.name for c in load_commands(['run', '--', 'python'])]\n"
            "print(json.dumps([names, sorted(m for m in sys.modules if m.startswith('stepscope.cli.'))]))")
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    names, modules = json.loads(r.stdout)
    assert names == ["run"]
    assert "stepscope.cli.run" in modules
    assert not {"stepscope.cli.serve", "stepscope.cli.ls", "stepscope.cli.trace", "stepscope.cli.show"} & set(modules)


def test_every_subcommand_is_found_by_its_name() -> None:
    from stepscope.cli import COMMANDS, command_name, load_command

    for spec in COMMANDS:
        assert load_command(spec).name == command_name(spec), spec
