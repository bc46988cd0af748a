"""The CosmoFlow-like tf.data benchmark under `stepscope sweep` over TensorFlow's inter/intra-op threads
(a 2 x 1 grid on tiny data): the runs, their thread settings, steps and the first / later epoch heat maps."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import EXAMPLES, PY, stepscope_cmd

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed (extra tensorflow)", allow_module_level=True)
pytestmark = pytest.mark.slow


def test_inter_intra_sweep_heat_maps(tmp_path: Path) -> None:
    env = {**os.environ, "STEPSCOPE_HOME": str(tmp_path / "store")}
    env.pop("STEPSCOPE_DB", None)
    example = ["--", PY, str(EXAMPLES / "cosmoflow_like_data.py"), "--inter", "{inter}", "--intra", "{intra}",
               "--samples", "18", "--size", "8", "--batch-size", "4", "--epochs", "3"]
    r = subprocess.run(stepscope_cmd("sweep", "--param", "inter=0,2", "--param", "intra=1", "--json",
                                     "--metric", "metric.first_epoch_samples_per_s", *example),
                       capture_output=True, text=True, timeout=400, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    first = json.loads(r.stdout[r.stdout.index("{"):])  # after the example's own "epoch N: ..." lines
    heat = first["heatmap"]
    assert (heat["row_param"], heat["col_param"]) == ("inter", "intra")
    assert heat["row_values"] == ["0", "2"] and heat["col_values"] == ["1"]
    assert all(c[0] is not None and c[0] > 0 for c in heat["cells"])
    later = subprocess.run(stepscope_cmd("sweep", "--group", first["group"], "--json",
                                         "--metric", "metric.later_epochs_samples_per_s"),
                           capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert later.returncode == 0, later.stderr[-2000:]
    assert all(c[0] is not None and c[0] > 0 for c in json.loads(later.stdout)["heatmap"]["cells"])

    from stepscope.store import open_store

    st = open_store(tmp_path / "store")
    try:
        for point in first["points"]:
            (run_id,) = point["run_ids"]
            data = st.load(run_id)
            rank = data.ranks[0]
            # 18 volumes in batches of 4: 4 x 4 + 2 per epoch, 3 epochs, one step per batch
            assert np.array_equal(rank.steps["samples"], np.array(([4.0] * 4 + [2.0]) * 3))
            (fw,) = rank.extra["framework"]
            assert fw["name"] == "tensorflow"
            assert fw["inter_op_threads"] == int(point["values"]["inter"]) and fw["intra_op_threads"] == 1
    finally:
        st.close()
