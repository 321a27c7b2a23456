"""A records section read front to back in bounded pieces, for walks that must not hold it whole.

Owns `SectionReader`: over an iterator of pieces (`compression.decompressed_pieces`, or one piece
for an uncompressed section) it holds what the walk has not consumed yet plus the next piece, reads
varints across piece boundaries and skips bytes by dropping the pieces they span.

Invariants: what is held is the unconsumed tail of the previous piece plus one piece; `offset` +
`position` is always the section position of the next byte to read. Reads past the end of the
section raise IndexError, which the callers turn into the Kafka error of their context.

Callers: `records.validation` (the produce walk), `records.record` (`record_times`).
"""

from __future__ import annotations

from collections.abc import Iterator

from odradek.protocol.records.record_loops import read_varint


class SectionReader:
    """A records section read front to back, one piece at a time: `data[position:]` is what is held
    and not yet walked; `offset` is the section position of `data[0]`."""

    __slots__ = ("_pieces", "data", "position", "offset")

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self.data = b""
        self.position = 0
        self.offset = 0

    @property
    def section_position(self) -> int:
        return self.offset + self.position

    def more(self) -> bool:
        """Hold the next piece after what is held and not yet walked; False at the end of the section."""
        piece = next(self._pieces, None)
        if piece is None:
            return False
        rest = self.data[self.position :]
        self.offset += self.position
        self.data = rest + piece if rest else piece
        self.position = 0
        return True

    def varint(self) -> int:
        while True:
            try:
                value, self.position = read_varint(self.data, self.position)
                return value
            except IndexError:
                if not self.more():
                    raise

    def skip(self, count: int) -> None:
        """Step over `count` bytes, reading and dropping the pieces they span."""
        while count > len(self.data) - self.position:
            count -= len(self.data) - self.position
            self.offset += len(self.data)
            self.data, self.position = b"", 0
            if not self.more():
                raise IndexError("skipped past the end of the section")
        self.position += count
