"""The compatibility matrix: tests/compat/test_compat.py run against each version set, one virtual environment per
set, and a table of what passed.

    python benchmarks/compat.py                      # every set, venvs under /tmp/stepscope-compat
    python benchmarks/compat.py --sets torch-oldest,torch-newest --venvs /tmp/compat
    make compat                                      # the same, every set

Each set's venv is made once (from this interpreter's base Python) and kept; it is reused while its requirement
list is unchanged (a stamp file), so a second run only runs the tests. stepscope itself is not installed there:
a `.pth` file puts this tree's `src/` on the path, with the compiled parts `make setup` built in place (the
report names those it found). The newest sets ask pip for the newest
release it resolves (CUDA builds of torch, several GB each, run on CPU). Exit status 1 when any test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "tests/compat/test_compat.py"
CORE = ["orjson>=3.9", "rich>=13", "psutil>=5.9", "pytest>=8"]  # stepscope's own dependencies, and the runner
PACKAGES = ("torch", "tensorflow-cpu", "keras", "jax", "optax", "numpy")
EXTRAS = ("torch", "tensorflow", "jax")  # pyproject's extras whose ranges the matrix tests
TESTS = {"test_torch_loop_counts_exactly": "torch loop", "test_keras_fit_counts_exactly": "keras fit",
         "test_tf_gradient_tape_loop_counts_exactly": "tf tape", "test_jax_api_counts_exactly": "jax api"}


def pinned(name: str) -> str:
    """NAME==VERSION as constraints.txt pins it (the versions the normal suite runs with)."""
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        spec = line.split("#")[0].strip()
        if spec.split("==")[0].strip().lower() == name:
            return spec
    raise SystemExit(f"compat: {name} is not pinned in constraints.txt")


def claimed() -> dict[str, tuple[str, str]]:
    """(oldest, newest) release pyproject's framework extras claim, by package: `NAME>=LOW,<=HIGH`."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    found: dict[str, tuple[str, str]] = {}
    for extra in EXTRAS:
        for req in extras[extra]:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([^,]+),<=(.+)", req.replace(" ", ""))
            if m is None:
                raise SystemExit(f"compat: pyproject's {extra} extra claims {req!r}: expected NAME>=OLDEST,<=NEWEST")
            found[m[1].lower()] = (m[2], m[3])
    return found


@dataclass(frozen=True, slots=True)
class VersionSet:
    name: str
    requirements: tuple[str, ...]
    what: str


def version_sets(oldest_torch: str | None = None) -> list[VersionSet]:
    """The sets; the oldest ones are the lower ends of pyproject's claims (OLDEST_TORCH overrides torch's, to try
    a release before claiming it)."""
    frameworks = ("tensorflow-cpu", "keras", "jax", "jaxlib", "optax")
    claims = claimed()
    oldest_torch = oldest_torch or claims["torch"][0]
    oldest = tuple(f"{name}=={claims['jax' if name == 'jaxlib' else name][0]}" for name in frameworks)
    return [
        # torch 2.1-2.2 wheels were built against NumPy 1.x: with NumPy 2 their tensor <-> array calls fail
        VersionSet("torch-oldest", (f"torch=={oldest_torch}", "numpy>=1.24,<2"), "the oldest torch pyproject claims"),
        VersionSet("torch-pinned", (pinned("torch"), "numpy>=1.24"), "constraints.txt's torch"),
        VersionSet("torch-newest", ("torch", "numpy>=1.24"), "the newest torch pip resolves"),
        # the oldest releases pyproject claims, of one season (TensorFlow 2.16 wheels need NumPy 1.x)
        VersionSet("frameworks-oldest", (*oldest, "numpy>=1.24,<2"),
                   "the oldest TensorFlow, Keras, JAX pyproject claims"),
        VersionSet("frameworks-pinned", (*(pinned(f) for f in frameworks), "numpy>=1.24"),
                   "constraints.txt's TensorFlow, Keras, JAX"),
        VersionSet("frameworks-newest", (*frameworks, "numpy>=1.24"), "the newest TensorFlow, Keras, JAX pip resolves"),
    ]


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, text=True, capture_output=True, **kw)  # type: ignore[call-overload, no-any-return]


def prepare(vs: VersionSet, venvs: Path, pip_args: list[str]) -> Path:
    """The set's venv, made and filled once; reused while its requirement list is the same."""
    venv = venvs / vs.name
    py = venv / "bin" / "python"
    stamp = venv / ".compat-requirements"
    wanted = "\n".join([*vs.requirements, *CORE, *pip_args])
    if py.exists() and stamp.exists() and stamp.read_text() == wanted:
        return py
    if not py.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        proc = run([base, "-m", "venv", str(venv)])
        if proc.returncode:
            raise SystemExit(f"compat: could not make {venv}: {proc.stderr.strip()[-500:]}")
    print(f"[{vs.name}] installing {' '.join(vs.requirements)} into {venv} ...", flush=True)
    proc = run([str(py), "-m", "pip", "install", "-q", "--upgrade", *pip_args, *vs.requirements, *CORE])
    if proc.returncode:
        raise SystemExit(f"compat: pip could not install {vs.name}: {proc.stderr.strip()[-1500:]}")
    site = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(site) / "stepscope-src.pth").write_text(str(ROOT / "src") + "\n")
    stamp.write_text(wanted)
    return py


def versions(py: Path) -> dict[str, str | None]:
    code = ("import importlib.metadata as m, json\n"
            "def v(p):\n    try: return m.version(p)\n    except m.PackageNotFoundError: return None\n"
            f"print(json.dumps({{p: v(p) for p in {list(PACKAGES)!r}}}))")
    found: dict[str, str | None] = json.loads(run([str(py), "-c", code]).stdout)
    return found


def beyond_claims(found: dict[str, str | None]) -> list[str]:
    """Installed releases above pyproject's newest claimed one: where they pass, the claim can be extended."""
    notes = []
    for name, (_, high) in claimed().items():
        version = found.get(name)
        if version and _release(version) > _release(high):
            notes.append(f"{name} {version} is newer than pyproject claims (<={high}): if it passed, extend the claim")
    return notes


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version (2.13.0+cpu -> (2, 13, 0)); enough to order the releases claimed here."""
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:3])


def compiled_parts() -> list[str]:
    """The compiled parts built in place in this tree (`make setup`), which every venv's `.pth` reaches."""
    return sorted(p.name.split(".")[0] for p in (ROOT / "src" / "stepscope").rglob("*.so"))


def outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """Each test's outcome (pass / FAIL / skip) and its first line of reason, from pytest's JUnit XML."""
    result: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            result[name] = ("FAIL", (bad.get("message") or "").splitlines()[0][:200] if bad.get("message") else "")
        elif skipped is not None:
            result[name] = ("skip", (skipped.get("message") or "")[:200])
        else:
            result[name] = ("pass", "")
    return result


def test_in(py: Path, out: Path) -> tuple[dict[str, tuple[str, str]], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEPSCOPE", "PYTHONPATH", "VIRTUAL_ENV"))}
    junit = out / "junit.xml"
    proc = run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
                "--import-mode=importlib", f"--junitxml={junit}", "-rfEs", MODULE], cwd=ROOT, env=env)
    if not junit.exists():
        return {}, proc.stdout[-3000:] + proc.stderr[-3000:]
    return outcomes(junit), proc.stdout[-6000:]


def table(rows: list[dict[str, object]]) -> str:
    head = ["set", *PACKAGES[:4], *TESTS.values()]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for row in rows:
        v = row["versions"]
        assert isinstance(v, dict)
        res = row["outcomes"]
        assert isinstance(res, dict)
        cells = [str(row["set"]), *(v.get(p) or "—" for p in PACKAGES[:4]), *(res.get(t, ("—", ""))[0] for t in TESTS)]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="all", help="comma-separated set names, or 'all' (see --list)")
    p.add_argument("--oldest-torch", help="the torch release torch-oldest installs (default: pyproject's lower end)")
    p.add_argument("--venvs", type=Path, default=Path("/tmp/stepscope-compat"),
                   help="where the venvs live (outside the repository)")
    p.add_argument("--pip-arg", action="append", default=[], help="an option for pip install (repeatable)")
    p.add_argument("--json", type=Path, help="write the rows as JSON here too")
    p.add_argument("--list", action="store_true", help="list the sets and stop")
    args = p.parse_args()
    sets = version_sets(args.oldest_torch)
    if args.list:
        for vs in sets:
            print(f"{vs.name:18} {vs.what}: {' '.join(vs.requirements)}")
        return 0
    names = [vs.name for vs in sets] if args.sets == "all" else [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = sorted(set(names) - {vs.name for vs in sets})
    if unknown:
        print(f"compat: unknown set(s) {', '.join(unknown)}; known: {', '.join(vs.name for vs in sets)}",
              file=sys.stderr)
        return 2
    if args.venvs.resolve().is_relative_to(ROOT):
        print(f"compat: --venvs {args.venvs} is inside the repository; put it elsewhere (e.g. /tmp)", file=sys.stderr)
        return 2
    rows: list[dict[str, object]] = []
    results: list[dict[str, tuple[str, str]]] = []
    for vs in (vs for vs in sets if vs.name in names):
        t0 = time.monotonic()
        py = prepare(vs, args.venvs, args.pip_arg)
        out = args.venvs / vs.name / "last"
        out.mkdir(exist_ok=True)
        res, tail = test_in(py, out)
        row: dict[str, object] = {"set": vs.name, "requirements": list(vs.requirements), "versions": versions(py),
                                  "outcomes": res,
                                  "seconds": round(time.monotonic() - t0, 1)}
        rows.append(row)
        results.append(res)
        print(f"[{vs.name}] {row['versions']} in {row['seconds']} s", flush=True)
        for note in beyond_claims(row["versions"]):  # type: ignore[arg-type]
            print(f"  note: {note}")
        for test, (outcome, why) in res.items():
            if outcome != "pass":
                print(f"  {test}: {outcome} {why}")
        if not res or any(o == "FAIL" for o, _ in res.values()):
            print(tail)
    print(f"\ncompiled parts in src/ (used by every set): {', '.join(compiled_parts()) or 'none (pure Python)'}")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    failed = any(not res or any(o == "FAIL" for o, _ in res.values()) for res in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
