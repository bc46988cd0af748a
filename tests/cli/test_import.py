"""`stepscope import`: attach fixture traces to a run, rank from the trace; bad files attach nothing."""

from __future__ import annotations

import gzip
import shutil

from tests.conftest import TRACES, load


def test_import_attaches_by_rank_and_refuses_clashes(tiny_store, cli, tmp_path):
    store = tiny_store
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(TRACES / "sampled_128rank" / "rank0.json.gz", folder / "a.json.gz")
    shutil.copy(TRACES / "sampled_128rank" / "rank1.json.gz", folder / "b.json.gz")
    r = cli("import", "latest", str(folder), "--accept-misfit")  # another job's traces, on purpose
    assert r.rc == 0, r
    data = load(store)
    assert {"artifacts/traces/rank0.json.gz", "artifacts/traces/rank1.json.gz"} <= set(data.artifacts)
    src = gzip.decompress((TRACES / "sampled_128rank" / "rank1.json.gz").read_bytes())
    assert gzip.decompress((tmp_path / "store" / "runs" / data.run.id / "artifacts/traces/rank1.json.gz")
                           .read_bytes()) == src
    again = cli("import", "latest", str(folder / "a.json.gz"), "--accept-misfit")
    assert again.rc == 2 and "--force" in again.err
    assert cli("import", "latest", str(folder / "a.json.gz"), "--force", "--accept-misfit").rc == 0


def test_import_of_a_damaged_trace_names_it_and_attaches_nothing(tiny_store, cli, tmp_path):
    store = tiny_store
    good = tmp_path / "rank0.json.gz"
    shutil.copy(TRACES / "cpu_only" / "rank34.json.gz", good)
    bad = tmp_path / "rank1.json.gz"
    bad.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    r = cli("import", "latest", str(good), str(bad))
    assert r.rc == 2 and str(bad) in r.err and "Traceback" not in r.err
    assert not any(a.startswith("artifacts/traces") for a in load(store).artifacts)
