"""`make sanitize`: the compiled trace reader built with AddressSanitizer and UBSan, fed every fuzz input of the suite.

Run by the Makefile with the sanitized build's path and the sanitizer runtimes preloaded (LD_PRELOAD), so this
Python process (not itself instrumented) loads the sanitized extension in place of the installed one. First the
positive controls: each runs in a child process that calls a bug planted in the sanitized build only
(``sanitizer_control``: a heap overflow, a signed overflow, memcpy from NULL as ``buf_put`` once did) and must die
with the sanitizer's report; a control that passes silently means the sanitizers are not watching and fails the
target. Then the inputs: the fixture traces, the 1,200 mutations of tests/faults/test_traces_fuzz.py and the 2,400
of tests/faults/test_traces_fuzz_types.py, each read by the C reader at a few block sizes. A sanitizer report
aborts the process (halt_on_error, -fno-sanitize-recover), so the target fails on the first one.

    python tests/faults/sanitize_reader.py BUILD.so            controls, then every input
    python tests/faults/sanitize_reader.py BUILD.so --control KIND    one planted bug (what the controls run)
"""

from __future__ import annotations

import gzip
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTROLS = {"asan": "AddressSanitizer: heap-buffer-overflow", "ubsan": "runtime error: signed integer overflow",
            "nullcopy": "runtime error: null pointer passed as argument 1"}


def load(build: str) -> None:
    """Put the sanitized build in place of ``stepscope.traces._kineto_reader`` before the reader imports it."""
    name = "stepscope.traces._kineto_reader"
    loader = importlib.machinery.ExtensionFileLoader(name, build)
    spec = importlib.util.spec_from_file_location(name, build, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    from stepscope.traces import compiled

    if getattr(compiled, "_kineto_reader", None) is not module:
        raise SystemExit("sanitize: the reader did not take the sanitized build")


def controls(build: str) -> None:
    for kind, report in CONTROLS.items():
        child = subprocess.run([sys.executable, __file__, build, "--control", kind], capture_output=True, text=True,
                               timeout=120)
        if child.returncode == 0 or report not in child.stderr:
            raise SystemExit(f"sanitize: the {kind} control was not caught (exit {child.returncode}): the sanitizers "
                             f"are not active — {child.stderr.strip()[-300:]!r}")
        print(f"sanitize: control {kind}: caught ({report})")


def inputs() -> list[tuple[str, bytes]]:
    sys.path.insert(0, str(ROOT))
    from tests.faults import test_traces_fuzz, test_traces_fuzz_types

    out = [(p.name, p.read_bytes()) for p in sorted((ROOT / "tests" / "data" / "traces").glob("*/*.json*"))]
    out += [(f"fuzz-{i}{how[how.index('.'):]}", data) for i, how, data in test_traces_fuzz._cases()]
    out += [(f"types-{i}.json", data) for i, (_, data, _, _) in enumerate(test_traces_fuzz_types.cases())]
    return out


def main() -> None:
    build = sys.argv[1]
    load(build)
    if sys.argv[2:3] == ["--control"]:
        sys.modules["stepscope.traces._kineto_reader"].sanitizer_control(sys.argv[3])
        return
    controls(build)
    from stepscope.errors import TraceError
    from stepscope.traces.kineto import read_trace

    t0 = time.monotonic()
    cases = inputs()
    outcomes = {"read": 0, "refused": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, data) in enumerate(cases):
            if name.endswith(".gz") and not data.startswith(b"\x1f\x8b"):
                data = gzip.compress(data)
            path = Path(tmp) / name
            path.write_bytes(data)
            for block in (None, 97) if len(data) < 1_000_000 else (None,):
                try:
                    read_trace(path, reader="c", block_bytes=block)
                    outcomes["read"] += 1
                except TraceError:
                    outcomes["refused"] += 1
            path.unlink()
            if i % 500 == 0:
                print(f"sanitize: {i} of {len(cases)} inputs", flush=True)
    print(f"sanitize: {len(cases)} inputs, {sum(outcomes.values())} reads ({outcomes['read']} tables, "
          f"{outcomes['refused']} one-line refusals) under AddressSanitizer and UBSan, no report, "
          f"{time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    os.environ.setdefault("STEPSCOPE_TRACE_READER", "c")
    main()
