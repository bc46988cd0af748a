"""`show`'s framework line from a run's ``framework`` record (report/terminal.framework_line)."""

from __future__ import annotations

from stepscope.report.terminal import framework_line


def test_tensorflow_record() -> None:
    fw = {"name": "tensorflow", "tensorflow": "2.21.0", "keras": "3.15.1", "backend": "tensorflow",
          "inter_op_threads": 2, "intra_op_threads": 0, "logical_devices": ["/device:CPU:0"]}
    assert framework_line(fw) == ("tensorflow: tensorflow 2.21.0, keras 3.15.1, backend tensorflow, threads "
                                  "inter-op 2 / intra-op default, devices /device:CPU:0")


def test_jax_record() -> None:
    fw = {"name": "jax", "jax": "0.10.2", "jaxlib": "0.10.2", "jax_backend": "cpu", "jax_devices": ["cpu:0"]}
    assert framework_line(fw) == "jax: jax 0.10.2, devices cpu:0"
