"""`stepscope advise RUN --verify`: re-run a run's command as interleaved A/B pairs, A as recorded, B with one
suggestion applied (analyze/advisor/verify.py decides), through `bench --ab`'s order and paired test. The runs
are stored as one group (kind ``advise-verify``) whose spec holds the outcomes; every run is tagged with the
verified run and the change it tried."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from stepscope.analyze.advisor.verify import CONFIRMED, MIN_PAIRS, Outcome, Suggestion
from stepscope.analyze.diff.metric import DEFAULT_METRIC
from stepscope.analyze.diff.significance import Change as VerdictChange
from stepscope.analyze.diff.significance import Verdict
from stepscope.cli.childout import children_output
from stepscope.errors import UserError
from stepscope.model.changes import Change, apply_changes
from stepscope.store.store import Store

GROUP_KIND = "advise-verify"


@dataclasses.dataclass(frozen=True, slots=True)
class Recorded:
    """What re-running a run needs: its command, working directory, environment and collection options."""

    run_id: str
    name: str
    command: list[str]
    cwd: str
    env: dict[str, str]
    params: dict[str, str]
    options: dict[str, Any]
    env_recorded: bool = False
    """The run recorded its speed-relevant environment (``env``): variables of that kind it did not have are
    left out of the re-runs too."""


def recorded(store: Store, ref: str) -> Recorded:
    """The run's command as it ran; a run that cannot be re-run is a UserError (one line, exit 2)."""
    run = store.load(ref).run
    rid = run.id
    status = run.status.value
    if status == "running":
        raise UserError(f"run {rid} is still running: verify it once it has finished")
    if status == "incomplete":
        raise UserError(f"run {rid} was killed before it finished (incomplete): its command is no baseline to "
                        "compare with — verify a run that completed")
    if status == "failed":
        raise UserError(f"run {rid} failed (exit code {run.exit_code}): verify a run that completed")
    command = list(run.command)
    if not command:
        raise UserError(f"run {rid} has no recorded command (imported or recorded through the API): nothing to "
                        "re-run — record it with `stepscope run -- CMD`")
    if (why := _no_program(command)) is not None:
        raise UserError(f"run {rid} ran {why}: its command line ({' '.join(command)}) does not hold the program, "
                        "so it cannot be re-run — put the code in a script and record it with `stepscope run -- "
                        "python SCRIPT`")
    if not run.cwd or not os.path.isdir(run.cwd):
        raise UserError(f"run {rid} ran in {run.cwd or '(not recorded)'}, which is gone: its command cannot be "
                        "re-run as it ran")
    exe = command[0]
    if os.sep in exe:
        path = exe if os.path.isabs(exe) else os.path.join(run.cwd, exe)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UserError(f"run {rid}'s program {exe} is gone (in {run.cwd}): its command cannot be re-run")
    else:
        import shutil

        if shutil.which(exe) is None:
            raise UserError(f"run {rid}'s program {exe!r} is not on PATH: its command cannot be re-run")
    for arg in command[1:]:
        if arg.endswith(".py") and not arg.startswith("-"):
            path = arg if os.path.isabs(arg) else os.path.join(run.cwd, arg)
            if not os.path.isfile(path):
                raise UserError(f"run {rid}'s script {arg} is gone (in {run.cwd}): its command cannot be re-run")
    env = run.extra.get("env")
    return Recorded(rid, run.name, command, run.cwd, dict(env) if isinstance(env, dict) else {}, dict(run.params),
                    dict(run.options), env_recorded=isinstance(env, dict))


_KERNELS = ("ipykernel_launcher", "ipykernel", "colab_kernel_launcher", "IPython", "jupyter", "jupyter_console",
            "notebook")
"""Modules that start an interactive session (a notebook kernel, IPython): the code they ran is not in argv."""
_PY_ARG_OPTIONS = ("-W", "-X")
"""Python options that take the next argument as their value."""


def _no_program(command: list[str]) -> str | None:
    """What a Python command ran when its program is not in the command line (a program read from standard input,
    an interactive interpreter, a notebook kernel), or None: a script, ``-c CODE`` or a module, re-runnable."""
    if not os.path.basename(command[0]).startswith(("python", "ipython")):  # IPython's shell reads like python
        return None
    args = iter(command[1:])
    for arg in args:
        if arg == "-":
            return "a program read from standard input"
        if not arg.startswith("-"):
            return None  # the script
        if arg.startswith("-c"):
            return None
        if arg.startswith("-m"):
            module = arg[2:] or next(args, "")
            return f"an interactive session ({module})" if module.split(".")[0] in _KERNELS else None
        if arg in _PY_ARG_OPTIONS:
            next(args, None)
    return "an interactive interpreter or a program read from standard input"


def plan(store: Store, rec: Recorded, *, rule: str | None,
         extra: Sequence[Change] = ()) -> tuple[list[Suggestion], list[str]]:
    """The suggestions to verify: the run's advice whose remedy is a setting (``rule``: that rule's only), or, when
    ``extra`` settings are given, those (with ``rule``'s too, if named); and one line per finding that needs a
    code change (not tried)."""
    from stepscope.analyze.advisor.verify import suggestions
    from stepscope.app import RunAnalysis

    advice = RunAnalysis.from_store(store, rec.run_id).advice
    if rule is not None and rule not in advice.checked:
        raise UserError(f"--rule {rule}: no such rule — rules: {', '.join(advice.checked)}")
    if rule is not None and not any(f.rule_id == rule for f in advice.findings):
        raise UserError(f"--rule {rule}: the rule did not fire for run {rec.run_id} — nothing to verify "
                        f"(stepscope advise {rec.run_id} lists what did)")
    found, code = suggestions(advice, rule=rule)
    if extra and rule is None:
        found, code = [], []
    for c in extra:
        try:
            apply_changes([c], {}, rec.command)
        except ValueError as e:
            raise UserError(f"--change {c.label}: {e}") from None
    found += [Suggestion(c.label, ("change",), (c,), None) for c in extra]
    return found, [f"{f.rule_id}: {f.title} — needs a code change, not tried" for f in code]


@contextlib.contextmanager
def _as_recorded(rec: Recorded) -> Iterator[None]:
    """In the run's working directory, without the speed-relevant variables of this shell that the run did not
    have (the launcher copies this process's environment into the children)."""
    from stepscope.collect.startup.launch import relevant_env

    here = os.getcwd()
    dropped = {k: v for k, v in relevant_env(os.environ).items() if rec.env_recorded and k not in rec.env}
    for k in dropped:
        del os.environ[k]
    os.chdir(rec.cwd)
    try:
        yield
    finally:
        os.chdir(here)
        os.environ.update(dropped)


def _options(rec: Recorded) -> Any:
    from stepscope.collect.core.options import Options

    names = {f.name for f in dataclasses.fields(Options)}
    try:
        return Options(**{k: v for k, v in rec.options.items() if k in names})
    except (TypeError, ValueError) as e:  # the pairs still compare like with like; the user learns of it
        print(f"stepscope: warning: run {rec.run_id}'s collection options do not fit this version ({e}); the "
              "re-runs use the defaults", file=sys.stderr)
        return Options()


def verify(store: Store, rec: Recorded, todo: list[Suggestion], *, repeat: int, together: bool,
           children_out: str = "inherit", metric: str = DEFAULT_METRIC) -> tuple[str, list[Outcome]]:
    """Run each suggestion's pairs (then, ``together``, the confirmed ones at once); store the group; return its
    id and the outcomes. ``children_out``: where the runs' standard output goes: "inherit", "null" or "stderr"
    (``--json`` keeps stdout for its document). ``metric``: the clock the verdicts are decided on (diff/metric.py)."""
    from stepscope.analyze.advisor.verify import combined

    group = "verify-" + secrets.token_hex(4)
    created = time.time_ns()
    tried = list(todo)
    outcomes: list[Outcome] = []

    def save() -> None:  # after each suggestion: an interrupted verification keeps what it measured
        store.index.add_group(group, GROUP_KIND, rec.name, created,
                              {"run": rec.run_id, "command": rec.command, "cwd": rec.cwd, "repeat": repeat,
                               "all": together, "metric": metric, "suggestions": [s.to_dict() for s in tried],
                               "outcomes": [o.to_dict() for o in outcomes]})
        _mark(store, rec.run_id, group)

    save()
    for s in todo:
        outcomes.append(_pairs(store, rec, s, group, repeat, children_out, metric))
        save()
    confirmed = [o for o in outcomes if o.verdict == CONFIRMED]
    both = combined(confirmed) if together else None
    if together and both is None:  # say why --all tried nothing more (stderr: --json keeps stdout)
        print(f"advise --verify --all: {len(confirmed)} of {len(outcomes)} suggestions confirmed: nothing to try "
              "together", file=sys.stderr)
    if both is not None:
        tried.append(both)
        outcomes.append(_pairs(store, rec, both, group, repeat, children_out, metric))
        save()
    return group, outcomes


VERIFIED_FILE = "artifacts/verified.json"
"""In the verified run's directory: the groups that verified it. The run's report shows them, so its files must
change with them (the dashboard re-renders a report when its run directory's files change)."""


def _mark(store: Store, run_id: str, group: str) -> None:
    import json

    path = store.run_path(run_id) / VERIFIED_FILE
    try:
        groups = json.loads(path.read_text()).get("groups", []) if path.is_file() else []
        groups = [g for g in groups if g != group] + [group]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"groups": groups, "updated_ns": time.time_ns()}))
    except (OSError, ValueError, AttributeError) as e:
        print(f"stepscope: warning: could not note the verification in {path} ({e}); the dashboard may show "
              "this run's report without it until rebuilt with --rebuild", file=sys.stderr)


def _pairs(store: Store, rec: Recorded, s: Suggestion, group: str, repeat: int, children_out: str,
           metric: str = DEFAULT_METRIC) -> Outcome:
    """Sequential pairs (analyze/diff/sequential.py): looks at the verdict at the planned pair counts, each at its
    share of bench's 1%, and stops once it is decided; ``repeat`` is the most pairs it runs."""
    from stepscope.analyze.advisor.verify import failed, outcome, pair_spread
    from stepscope.analyze.diff.sequential import Looks
    from stepscope.cli.bench import ab_order
    from stepscope.cli.finish import finish_run
    from stepscope.collect.startup.launch import launch
    from stepscope.report.progress import progress

    env_a = dict(rec.env)
    env_b, argv_b = apply_changes(s.changes, env_a, rec.command)
    params_b = {**rec.params, **{c.key: _text(c.value) for c in s.changes if c.kind == "param" and c.key in rec.params}}
    sides = {"A": (rec.command, env_a, rec.params), "B": (argv_b, env_b, params_b)}
    looks = Looks(min(MIN_PAIRS, repeat), repeat)
    ids: dict[str, list[str]] = {"A": [], "B": []}
    options = _options(rec)
    err = sys.stderr
    step: VerdictChange | None = None
    with _as_recorded(rec), progress(2 * repeat, f"verify {s.label}") as bar:
        for pair, side in ab_order(repeat):
            argv, env, params = sides[side]
            tags = {"verify": rec.run_id, "verify_change": s.label, "ab": side, "ab_pair": str(pair)}
            with _stdout_to(children_out):
                result = launch(store, list(argv), name=rec.name, params=params, tags=tags, options=options,
                                group=group, extra_env=env)
            bar.advance(note=f"{side} {result.run_id}")
            ids[side].append(result.run_id)
            if result.exit_code != 0:
                print(f"verify: {s.label}: run {result.run_id} ({side}) failed with exit code {result.exit_code}; "
                      "this suggestion stops here", file=err)
                return failed(s, f"run {result.run_id} ({side}) exited with code {result.exit_code}",
                              runs_a=tuple(ids["A"]), runs_b=tuple(ids["B"]), metric=metric)
            finish_run(store, result.run_id, print_summary=False)
            done = min(len(ids["A"]), len(ids["B"]))
            if len(ids["A"]) != len(ids["B"]) or not looks.is_look(done):
                continue
            step = _step_change(store, ids, looks.look_confidence, metric)
            if step is None or looks.stop(done, step.verdict):
                break
    spread = None
    if step is not None and step.verdict is Verdict.INCONCLUSIVE:
        spread = pair_spread(*(_step_times(store, ids[side], metric) for side in ("A", "B")))
    return outcome(s, step, runs_a=tuple(ids["A"]), runs_b=tuple(ids["B"]), confidence=looks.look_confidence,
                   spread_log=spread, rerun=rerun_command(rec.run_id, s, metric), metric=metric)


def _step_times(store: Store, ids: list[str], metric: str = DEFAULT_METRIC) -> list[float | None]:
    """Each run's tested value of ``metric`` (its median step time by default, warm-up excluded: what ``diff``
    compares)."""
    from stepscope.analyze.diff.metric import step_metric
    from stepscope.analyze.diff.runlevel import run_values

    attr = step_metric(metric).attr
    return [getattr(run_values(store.load(r)), attr) for r in ids]


def rerun_command(run_id: str, s: Suggestion, metric: str = DEFAULT_METRIC) -> str:
    """The `advise --verify` that verifies ``s`` again: ``--rule`` for the advice's suggestion, ``--change`` for a
    setting the user named; a combination (``--all``) with the options that lead to it again."""
    parts = ["stepscope", "advise", run_id, "--verify"]
    rules = [r for r in s.rule_ids if r != "change"]
    if len(rules) == 1:  # two or more advice suggestions come from the whole advice, without --rule
        parts += ["--rule", rules[0]]
    for r, c in zip(s.rule_ids, s.changes, strict=True):
        if r == "change":
            parts += ["--change", shlex.quote(f"{c.kind}:{c.key}={_text(c.value)}")]
    if len(s.changes) > 1:
        parts.append("--all")
    if metric != DEFAULT_METRIC:
        parts += ["--metric", metric]
    return " ".join(parts)


def _text(value: str | int | bool) -> str:
    """A setting's value as the command line carries it (booleans as true/false, as apply_changes writes them)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _step_change(store: Store, ids: dict[str, list[str]], confidence: float,
                 metric: str = DEFAULT_METRIC) -> VerdictChange | None:
    """The paired run-level test of ``metric`` on the A and B runs, exactly as `bench --ab --metric` prints it, at
    the look's ``confidence``."""
    from stepscope.analyze.diff import DiffSettings, DiffSide, diff

    a = [store.load(r) for r in ids["A"]]
    b = [store.load(r) for r in ids["B"]]
    result = diff(DiffSide("A", data=a[0], repeats=tuple(a[1:])), DiffSide("B", data=b[0], repeats=tuple(b[1:])),
                  settings=DiffSettings(paired=True, confidence=confidence, metric=metric))
    return result.headline


def _stdout_to(where: str) -> contextlib.AbstractContextManager[None]:
    """The children's stdout (they inherit fd 1) to /dev/null ("null": ``--quiet-runs``, the pairs print the
    training's output 2N times) or to stderr ("stderr": ``--json``); "inherit" leaves it."""
    return children_output(None if where == "inherit" else where)


def stored_outcomes(store: Store, run_id: str) -> list[tuple[str, list[Outcome]]]:
    """Every stored verification of ``run_id``: (group, outcomes), oldest first."""
    out = []
    for gid, _kind, _name, _created, spec in store.index.groups(GROUP_KIND):
        if spec.get("run") == run_id:
            try:
                out.append((gid, [Outcome.from_dict(o) for o in spec.get("outcomes", [])]))
            except (KeyError, TypeError, ValueError):
                continue
    return out


def parse_change(text: str) -> Change:
    """``--change KIND:KEY=VALUE`` (env:OMP_NUM_THREADS=2, loader:num_workers=4, threads:intra=2,
    param:batch_size=64) as a Change; integers and true/false as such."""
    kind, _, rest = text.partition(":")
    key, eq, raw = rest.partition("=")
    if not eq or not key or kind not in ("env", "loader", "threads", "param"):
        raise UserError(f"--change {text!r}: expected KIND:KEY=VALUE with KIND env, loader, threads or param, "
                        "e.g. --change loader:num_workers=4")
    value: str | int | bool = raw
    if kind in ("loader", "threads"):
        value = True if raw.lower() == "true" else False if raw.lower() == "false" else \
            int(raw) if raw.lstrip("-").isdigit() else raw
    try:
        return Change(kind, key, value, f"{key}={raw}")  # type: ignore[arg-type]
    except ValueError as e:
        raise UserError(f"--change {text!r}: {e}") from None

