"""Fuzzing the record reader (issue 19, the record-file half of the fuzz test).

A seeded generator mutates the rank file of a real observed run (API steps, nested regions, logged
metrics, system samples, model summary) plus communication, device and data-loader records in the
collectors' own shapes: bit flips, truncations, lines deleted, doubled, swapped or spliced, garbage
and NUL bytes, and structural mutations of valid JSON (wrong types, huge numbers, missing or renamed
keys, columns of unequal length). At least 1,000 mutated files per run go through the reader; every
one must load or be refused with one line (StoreFormatError), in bounded time; every fourth loaded run
is also summarised, rendered and exported as tables (what show / report / export do).
"""

from __future__ import annotations

import copy
import io
import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from stepscope.analyze.run.summary import summarize_run
from stepscope.errors import StoreFormatError
from stepscope.report.export.tables import run_tables
from stepscope.report.terminal import console, short_report
from stepscope.store.rundir import RANKS, read_run
from tests.conftest import PY, SCRIPTS, stepscope_cmd

N_FILES = 1200
SEED = 190019
ODD_VALUES: list[Any] = [None, "x", "", -1, 0, 2**70, -(2**64), 1e308, -1e308, 1.5, True, [], {}, [1, "a"],
                         {"kind": "steps"}, "\u0000", "💥" * 3]


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real observed run, its rank file extended with comm / step_device / dataloader records."""
    import os
    import subprocess

    root = tmp_path_factory.mktemp("fuzz")
    env = {**os.environ, "STEPSCOPE_HOME": str(root / "store")}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0.1", "--", PY,
                                     str(SCRIPTS / "api_train.py")), capture_output=True, text=True, env=env,
                       cwd=root, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    [run_dir] = list((root / "store" / "runs").iterdir())
    [rank_file] = list((run_dir / RANKS).iterdir())
    lines = rank_file.read_bytes().splitlines()
    t = orjson.loads(lines[1]).get("cols", {}).get("start_ns", [1_700_000_000_000_000_000])[0]
    extra = [
        {"kind": "comm", "cols": {"op": ["all_reduce", "barrier"], "step": [0, 1], "start_ns": [t, t + 10],
                                  "duration_ns": [1000, 2000], "bytes": [4096.0, None], "peer": [-1, -1],
                                  "group_size": [2, 2], "seq": [0, 1]}},
        {"kind": "step_device", "index": 1, "device_ns": 12345.0, "mem_allocated_peak_bytes": 1e6},
        {"kind": "dataloader", "batch_size": 8, "num_workers": 0, "pin_memory": False, "t_ns": t},
    ]
    body = [orjson.dumps(rec) for rec in extra]
    rank_file.write_bytes(b"\n".join(lines[:-1] + body + lines[-1:]) + b"\n")
    assert len(read_run(run_dir).ranks[0].steps) > 0
    return run_dir


def _mutate_value(rng: random.Random, rec: Any) -> Any:
    """Replace, delete or rename one value somewhere inside a decoded record."""
    rec = copy.deepcopy(rec)
    if not isinstance(rec, dict) or not rec:
        return rng.choice(ODD_VALUES)
    node: Any = rec
    for _ in range(rng.randint(0, 3)):  # walk down a few levels
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
            if isinstance(node[key], (dict, list)) and node[key]:
                node = node[key]
                continue
        break
    if isinstance(node, list) and node:
        op = rng.random()
        if op < 0.4:
            node[rng.randrange(len(node))] = rng.choice(ODD_VALUES)
        elif op < 0.7:
            del node[rng.randrange(len(node))]  # a column shorter than the others
        else:
            node.append(rng.choice(ODD_VALUES))
        return rec
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        op = rng.random()
        if op < 0.6:
            node[key] = rng.choice(ODD_VALUES)
        elif op < 0.8:
            del node[key]
        else:
            node[key + "_x"] = node.pop(key)
    return rec


def mutate(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(9)
        i = rng.randrange(len(lines))
        if op == 0 and data:  # flip one bit
            b = bytearray(b"\n".join(lines))
            k = rng.randrange(len(b))
            b[k] ^= 1 << rng.randrange(8)
            lines = bytes(b).split(b"\n")
        elif op == 1:  # truncate
            b = b"\n".join(lines)
            lines = b[:rng.randrange(len(b) + 1)].split(b"\n")
        elif op == 2 and len(lines) > 1:
            del lines[i]
        elif op == 3:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op == 4:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 5:  # splice two lines (a write glued to the next)
            j = rng.randrange(len(lines))
            lines[i] = lines[i][:rng.randrange(len(lines[i]) + 1)] + lines[j][rng.randrange(len(lines[j]) + 1):]
        elif op == 6:
            lines.insert(i, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))))
        else:  # structural: valid JSON, wrong record
            try:
                rec = orjson.loads(lines[i])
            except orjson.JSONDecodeError:
                continue
            lines[i] = json.dumps(_mutate_value(rng, rec)).encode()  # (orjson refuses 2**70)
    return b"\n".join(lines)


def test_a_thousand_mutated_record_files_load_or_fail_in_one_line(seed_run: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    [original] = list((seed_run / RANKS).iterdir())
    base = original.read_bytes()
    run_dir = tmp_path / "run"
    shutil.copytree(seed_run, run_dir)
    target = run_dir / RANKS / original.name
    loaded = refused = reported = analysed = 0
    slowest = 0.0
    for n in range(N_FILES):
        mutated = b"" if n % 97 == 0 else mutate(rng, base)
        target.write_bytes(mutated)
        t0 = time.perf_counter()
        try:
            data = read_run(run_dir)
        except StoreFormatError as e:  # a one-line refusal is an answer (a header claiming a newer format)
            assert "\n" not in str(e), (n, str(e))
            refused += 1
            continue
        finally:
            took = time.perf_counter() - t0
            slowest = max(slowest, took)
            assert took < 2.0 * max(1.0, len(mutated) / 1e6), (n, took)  # 2 s per MB at most
        loaded += 1
        notes = [note for r in data.ranks for note in r.notes] + list(data.run.extra.get("record_problems", []))
        reported += any("damaged record line" in note or "record file skipped" in note for note in notes)
        if n % 4 == 0:
            try:
                summary = summarize_run(data)
                out = console(file=io.StringIO(), width=120)
                out.print(short_report(summary))
                run_tables(data, summary)
            except Exception as e:  # any exception here is the failure under test
                pytest.fail(f"file {n}: {type(e).__name__}: {e}\n{mutated[:3000]!r}")
            analysed += 1
    print(f"loaded {loaded} refused {refused} reported {reported} analysed {analysed} slowest {slowest:.3f}s")
    assert loaded + refused == N_FILES >= 1000
    assert loaded > N_FILES * 0.9  # one damaged line costs that line, not the run
    assert reported > N_FILES * 0.5  # and the damage is said
    assert analysed >= N_FILES // 4 - 1
    assert slowest < 2.0
