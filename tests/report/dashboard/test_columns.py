"""The dashboard's compact column tables: every cell reads back as the value it encodes."""

from __future__ import annotations

import math

import pytest

from stepscope.report.dashboard.columns import dictionary, finite, table


def test_dictionary_codes_read_back() -> None:
    values = ["b", "a", "b", None, {"k": "1", "j": "2"}, {"j": "2", "k": "1"}, "a"]
    codes, distinct = dictionary(values)
    assert [distinct[c] for c in codes] == values
    assert len(distinct) == 4  # b, a, None, one dict (key order does not matter)


def test_table_columns_and_lengths() -> None:
    t = table({"id": ["r1", "r2", "r3"], "name": ["x", "y", "x"], "v": finite([1.0, math.nan, math.inf])},
              encoded=["name"])
    assert t["n"] == 3 and t["cols"]["id"] == ["r1", "r2", "r3"] and t["cols"]["v"] == [1.0, None, None]
    assert [t["dict"]["name"][c] for c in t["cols"]["name"]] == ["x", "y", "x"] and "id" not in t["dict"]
    with pytest.raises(ValueError, match="different lengths"):
        table({"a": [1], "b": [1, 2]})


def test_finite_rounds_to_significant_digits() -> None:
    assert finite([0.0101234567891, 5822.123456, None, math.nan], digits=6) == [0.0101235, 5822.12, None, None]


def test_dictionary_keeps_dicts_of_other_value_types_apart() -> None:
    values = [{"a": "1"}, {"a": 1}, {"a": True}, {"a": 1}, {"a": "1"}]
    codes, distinct = dictionary(values)
    assert len(distinct) == 3 and codes == [0, 1, 2, 1, 0]
    assert [type(distinct[c]["a"]) for c in codes] == [str, int, bool, int, str]
