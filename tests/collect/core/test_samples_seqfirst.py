"""Samples of a sequence-first model (pytorch/examples' word_language_model: input [bptt, batch], an LSTM with
batch_first=False) are sequences, not time steps; the report says the figure is a guess and names
--samples-per-step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tests.conftest import PY, SCRIPTS, Result, load

STEPS = 12


def _rank(cli: Callable[..., Result], store: Any, *args: str, opts: tuple[str, ...] = ()) -> Any:
    r = cli("run", "--quiet", "--sample-interval", "0.5", *opts, "--", PY, str(SCRIPTS / "seqfirst_lm.py"),
            "--steps", str(STEPS), *args, timeout=170)
    assert r.rc == 0, r
    return load(store).ranks[0]


def _guess_notes(rank: Any) -> list[str]:
    return [n for n in rank.notes if "--samples-per-step" in n]


def test_seq_first_lstm_counts_sequences_and_says_it_guessed(cli: Callable[..., Result], store: Any) -> None:
    rank = _rank(cli, store, "--bptt", "35", "--batch", "20")
    assert len(rank.steps) == STEPS
    assert np.all(rank.steps["samples"] == 20), rank.steps["samples"]  # not 35, the sequence length
    notes = _guess_notes(rank)
    assert len(notes) == 1 and "LSTM" in notes[0] and "batch_first=False" in notes[0], rank.notes
    shown = cli("show", "latest")
    assert shown.rc == 0, shown
    assert "--samples-per-step" in shown.out, shown.out  # the note, under warnings
    row = next(line for line in shown.out.splitlines() if line.startswith("samples per step"))
    assert "20 (a guess: see warnings)" in row, row


def test_batch_first_lstm_and_the_option_need_no_guess(cli: Callable[..., Result], store: Any) -> None:
    rank = _rank(cli, store, "--bptt", "35", "--batch", "20", "--batch-first")
    assert np.all(rank.steps["samples"] == 20)
    assert not _guess_notes(rank), rank.notes
    shown = cli("show", "latest")
    row = next(line for line in shown.out.splitlines() if line.startswith("samples per step"))
    assert "guess" not in row, row
    rank = _rank(cli, store, "--bptt", "35", "--batch", "20", opts=("--samples-per-step", "20"))
    assert np.all(rank.steps["samples"] == 20)
    assert not _guess_notes(rank), rank.notes
