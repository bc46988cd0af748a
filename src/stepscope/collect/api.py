"""The public API behind ``import stepscope``: sessions, explicit steps, metrics, models.

Inside `stepscope run` every call joins the launcher's run. On its own, ``session()`` (or the first
API call) creates a run in the store and finishes it when the block (or the process) ends.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from stepscope.collect.core.options import ENV_DISABLE, ENV_RUN_DIR, Options
from stepscope.collect.core.session import Session, current, set_current

T = TypeVar("T")
_perf = time.perf_counter_ns


def session_for_api(*, name: str | None = None, role: str | None = None) -> Session | None:
    """The process's session: the launcher's, or a standalone one made now. None when disabled."""
    s = current()
    if s is not None:
        if s.disabled:
            return None
        s.activate()
        return s
    if os.environ.get(ENV_DISABLE) or os.environ.get(ENV_RUN_DIR):
        return None  # under the launcher but a helper process: not observed
    try:
        return _standalone(name=name, role=role)
    except Exception as e:
        import logging

        logging.getLogger("stepscope").warning("stepscope: cannot record this run (%s); it goes on unobserved", e)
        os.environ[ENV_DISABLE] = "1"
        return None


def _standalone(*, name: str | None, role: str | None, params: dict[str, str] | None = None,
                tags: dict[str, str] | None = None, store: str | None = None) -> Session:
    from stepscope.collect.startup.bootstrap import attach
    from stepscope.collect.startup.metadata import command_line, git_info, host_info, hostname, software_info
    from stepscope.model.run import Run, RunStatus
    from stepscope.store import open_store
    from stepscope.store.rundir import process_start_ticks, write_end, write_manifest

    st = open_store(store, create=True)
    run_id, run_dir = st.new_run_dir()
    run_dir = Path(os.path.abspath(run_dir))  # the script may chdir later
    cmd = command_line()
    script = next((Path(a).stem for a in cmd[1:] if a.endswith(".py")), "python")
    run = Run(id=run_id, name=name or script, status=RunStatus.RUNNING, start_ns=time.time_ns(), end_ns=None,
              command=cmd, cwd=os.getcwd(), exit_code=None, git=git_info(Path.cwd()), host=host_info(),
              software=software_info(), world_size=1, params=dict(params or {}), tags=dict(tags or {}),
              options={}, extra={"launcher_pid": os.getpid(), "launcher_host": hostname(), "standalone": True,
                     "launcher_start": process_start_ticks()})
    write_manifest(run_dir, run)
    st.index.upsert_run(run, str(run_dir))

    def finish(session: Session, reason: str) -> None:
        from dataclasses import replace

        status = RunStatus.COMPLETED if reason == "exit" else (
            RunStatus.INCOMPLETE if reason.startswith(("signal", "interrupted")) else RunStatus.FAILED)
        end = time.time_ns()
        try:  # a full disk or a locked index at the end: one warning (Session.close), then the cleanup
            write_end(run_dir, status=status, end_ns=end, exit_code=0 if status == RunStatus.COMPLETED else 1,
                      reason=reason)
            st.index.upsert_run(replace(run, status=status, end_ns=end), str(run_dir))
        finally:
            _close_quietly(st)
            set_current(None)
            from stepscope.collect.core.undo import remove_all

            remove_all()  # an in-process session leaves torch as it found it

    session = Session(run_dir, run_id, Options(), role=role, on_close=finish)
    set_current(session)
    attach(session)
    session.activate()
    return session


def _close_quietly(st: Any) -> None:
    try:
        st.close()
    except Exception:
        pass


@contextmanager
def session(name: str | None = None, *, role: str | None = None, params: dict[str, Any] | None = None,
            tags: dict[str, Any] | None = None, store: str | None = None) -> Iterator[Session | None]:
    """Observe the enclosed block. Under `stepscope run` it names this process's role in the run;
    otherwise it creates a run (``name``, ``params``, ``tags``) in ``store`` and ends it with the block."""
    s = current()
    if s is not None:
        if role:
            s.role = role
            if s.activate():
                s.update_stream(role=role)
        ignored = [k for k, v in (("name", name), ("params", params), ("tags", tags), ("store", store)) if v]
        if ignored and s.activate():  # the launcher made the run: say so rather than drop them silently
            s.warn_once("session-args", f"stepscope.session({', '.join(f'{k}=...' for k in ignored)}) is ignored "
                        "under `stepscope run`, which names the run: use `stepscope run --name NAME "
                        "--param KEY=VALUE --tag KEY=VALUE`")
        yield s
        return
    if os.environ.get(ENV_RUN_DIR):
        yield None
        return
    try:
        s = _standalone(name=name, role=role, store=store,
                        params={k: str(v) for k, v in (params or {}).items()},
                        tags={k: str(v) for k, v in (tags or {}).items()})
    except Exception as e:
        import logging

        logging.getLogger("stepscope").warning("stepscope: cannot record this run (%s); it goes on unobserved", e)
        yield None
        return
    try:
        yield s
    except BaseException as e:
        s.close("interrupted" if isinstance(e, KeyboardInterrupt) else "exception")
        raise
    s.close("exit")


def steps(iterable: Iterable[T]) -> Iterator[T]:
    """Yield from ``iterable``, one step per item: fetching the item is data wait; the step ends when
    the loop body returns for the next item. Steps marked here replace the optimizer-marked ones."""
    s = session_for_api()
    it = iter(iterable)
    if s is None:
        yield from it
        return
    s.set_step_source("api")
    from stepscope.collect.core.batch import batch_size, batch_tokens

    while True:
        t0 = _perf()
        s.api_fetch = True
        try:
            item = next(it)
        except StopIteration:
            return
        finally:
            s.api_fetch = False
        t1 = _perf()
        try:
            s.add_fetch(t0, t1, batch_size(item), batch_tokens(item))
        except Exception as e:
            s.warn_once("steps", f"step timing failed ({e})")
        yield item
        s.mark_step(_perf(), source="api")


def step() -> None:
    """Mark the end of a step now (for loops that are not a single iterable)."""
    s = session_for_api()
    if s is not None:
        s.set_step_source("api")
        s.mark_step(_perf(), source="api")


def log(step: int | None = None, **metrics: float) -> None:
    """Record user metrics (loss, accuracy, reward) at the step in progress (or ``step``)."""
    s = session_for_api()
    if s is None:
        return
    for name, value in metrics.items():
        try:
            v = float(value.item() if hasattr(value, "item") else value)
        except (TypeError, ValueError):
            s.warn_once(f"log:{name}", f"log({name}=...) needs a number, got {type(value).__name__}")
            continue
        s.log_metric(name, v, step)


def watch(model: Any) -> None:
    """Name the model being trained (for the model summary and forward timing)."""
    s = session_for_api()
    if s is None:
        return
    from stepscope.collect.torch.hooks import watch_model

    watch_model(model)

