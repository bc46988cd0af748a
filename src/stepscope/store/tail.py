"""Reading a running run as it grows: each rank file is read from where the last read stopped.

The rank files are append-only (store/rundir.py): a poll reads only the bytes added since the last one and
feeds the whole lines among them to the rank's :class:`~stepscope.store.rundir.RankFileParser` (the same
parsing and damaged-line rules as a full read). A partially written last line is kept back, unparsed, until
its newline arrives; a rank file that appears later is picked up; a file whose header is not written yet is
waited for. The manifest and end record are reread each poll (small files, replaced atomically), so the
status turns from ``running`` to its final value when the launcher writes the end record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stepscope.model.tables import RankData, RunData
from stepscope.store.rundir import RANKS, RankFileParser, assemble_run, read_run_manifest

READ_CHUNK = 16 << 20
"""At most this many bytes of one file per poll, so a poll of a huge backlog stays short."""


@dataclass(slots=True)
class _RankTail:
    parser: RankFileParser
    offset: int = 0
    pending: bytes = b""
    """Bytes after the last newline read: a line still being written."""


@dataclass(slots=True)
class RunTail:
    """Incremental reader of one run directory; :meth:`poll` returns the run as recorded so far."""

    run_dir: Path
    _ranks: dict[str, _RankTail] = field(default_factory=dict)
    bytes_read: int = 0
    """Bytes read from rank files over every poll (each byte once)."""

    def poll(self) -> RunData:
        """Read what was appended since the last poll; the RunData of every whole line read so far."""
        run, end = read_run_manifest(self.run_dir)
        rank_dir = self.run_dir / RANKS
        ranks: list[RankData] = []
        problems: list[str] = []
        names = sorted(p.name for p in rank_dir.glob("rank-*.jsonl")) if rank_dir.is_dir() else []
        for name in names:
            tail = self._ranks.setdefault(name, _RankTail(RankFileParser(rank_dir / name)))
            try:
                self._read(tail)
            except OSError as e:
                problems.append(f"record file {name}: unreadable ({e.strerror or e})")
            if tail.parser.has_header:
                ranks.append(tail.parser.rank_data())
        return assemble_run(self.run_dir, run, end, ranks, problems)

    def _read(self, tail: _RankTail) -> None:
        with open(tail.parser.path, "rb") as fh:
            fh.seek(tail.offset)
            new = fh.read(READ_CHUNK)
        if not new:
            return
        tail.offset += len(new)
        self.bytes_read += len(new)
        data = tail.pending + new
        cut = data.rfind(b"\n")
        if cut < 0:
            tail.pending = data
            return
        tail.pending = data[cut + 1:]
        tail.parser.feed(data[:cut].split(b"\n"))

