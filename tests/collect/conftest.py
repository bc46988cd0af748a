"""Fixtures of the collect tests: the two region implementations (compiled and Python)."""

from __future__ import annotations

import pytest

import stepscope
from stepscope.collect import regions

REGION_IMPLS = ["python", pytest.param("c", marks=pytest.mark.skipif(regions.CRegion is None,
                                                                     reason="stepscope.collect._region not built"))]
"""Parameters of :func:`region_impl`: the Python reference and, where built, the compiled region."""


@pytest.fixture(params=REGION_IMPLS)
def region_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> type[regions.PyRegion]:
    """``region`` (as stepscope.region, regions.region and what ``timed`` uses) set to one implementation;
    ``STEPSCOPE_PURE_REGION`` set to match, for the processes a test starts."""
    cls = regions.PyRegion if request.param == "python" else regions.CRegion
    assert cls is not None
    # stepscope's API attributes load on first use: patch it first, so the value restored afterwards is the real
    # default, not the one patched into regions a line later
    monkeypatch.setattr(stepscope, "region", cls)
    monkeypatch.setattr(regions, "region", cls)
    monkeypatch.setenv(regions.ENV_PURE, "1" if request.param == "python" else "")
    return cls
