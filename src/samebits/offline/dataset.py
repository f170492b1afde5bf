"""The samples of a predict run: the input files opened as sources, one index space over all of
them (file after file), and reads of a range of it. Every sample must have the names, dtypes
and shapes of the first one. A bad file or row stops the read with one line naming it, or,
with ``skip_bad``, is left out and listed."""

from __future__ import annotations

import bisect
from typing import Any

from samebits.errors import UserError, first_line
from samebits.measure.batching import batch_size_of, concat_batches, take_rows
from samebits.models.inputs import ModelInputs
from samebits.offline.images import ImageSource
from samebits.offline.sources import BadInput, InputFile, Piece, Shapes, Skipped, Source, TensorFile, row_shapes


class Dataset:
    """``files`` as one sequence of samples; ``options`` as :func:`open_source` takes them."""

    def __init__(self, files: list[InputFile], options: dict[str, Any], *, skip_bad: bool = False) -> None:
        self.skip_bad, self.options = skip_bad, options
        self.sources: list[Source] = []
        self.skipped_files: list[Skipped] = []  # files that could not be opened (skip_bad)
        for f in files:
            try:
                self.sources.append(open_source(f, options))
            except BadInput as exc:
                if not skip_bad:
                    raise UserError(f"cannot read input '{f.path}': {exc}") from None
                self.skipped_files.append(Skipped(str(f.path), None, str(exc)))
        self.offsets = [0]
        for s in self.sources:
            self.offsets.append(self.offsets[-1] + s.rows)
        self._reference: Shapes | None = None

    @property
    def total(self) -> int:
        return self.offsets[-1]

    def reference(self) -> Shapes:
        """The names, dtypes and shapes of the first good sample: every sample must have them."""
        if self._reference is None:
            for source in self.sources:
                for row in range(min(source.rows, 64)):
                    piece = self._piece(source, row, row + 1, None)
                    if piece.inputs is not None:
                        self._reference = row_shapes(piece.inputs)
                        return self._reference
                    if not self.skip_bad:
                        self._raise(source, piece)
            raise UserError("no input sample could be read")
        return self._reference

    def read(self, start: int, stop: int) -> tuple[ModelInputs | None, list[Skipped]]:
        """Samples ``[start, stop)``: the good ones batched (``None`` if none), and the skipped."""
        reference = self.reference()
        pieces, skipped = [], []
        i = bisect.bisect_right(self.offsets, start) - 1
        while i < len(self.sources) and self.offsets[i] < stop:
            source, offset = self.sources[i], self.offsets[i]
            a, b = max(start, offset) - offset, min(stop, offset + source.rows) - offset
            if a < b:
                piece = self._piece(source, a, b, reference)
                if piece.bad and not self.skip_bad:
                    self._raise(source, piece)
                skipped += [Skipped(str(source.file.path), row, reason, offset + row) for row, reason in piece.bad]
                if piece.inputs is not None:
                    pieces.append(piece.inputs)
            if b == source.rows:
                source.close()
            i += 1
        return (concat_batches(pieces) if len(pieces) > 1 else pieces[0] if pieces else None), skipped

    def first_rows(self, n: int) -> ModelInputs:
        """Up to ``n`` good samples from the start (what a Predictor calibrates on); bad ones
        past those are not read yet."""
        stop = min(self.total, n)
        while True:
            batch, _ = self.read(0, stop)
            got = (batch_size_of(batch) or 0) if batch is not None else 0
            if got >= n or stop == self.total or stop >= 64 * n:
                break
            stop = min(self.total, stop * 2)
        if batch is None:
            raise UserError("none of the first input samples could be read")
        return take_rows(batch, 0, min(n, got))

    @staticmethod
    def _piece(source: Source, a: int, b: int, reference: Shapes | None) -> Piece:
        try:
            return source.read(a, b, reference)
        except BadInput as exc:
            return Piece(None, [(r, str(exc)) for r in range(a, b)])
        except Exception as exc:  # a decoder's own error: the file, as data, is bad
            return Piece(None, [(r, first_line(exc)) for r in range(a, b)])

    @staticmethod
    def _raise(source: Source, piece: Piece) -> None:
        row, reason = piece.bad[0]
        where = f" row {row}" if source.rows > 1 else ""
        raise UserError(f"input '{source.file.path}'{where}: {reason} (pass --skip-bad to leave such samples out)")


def open_source(file: InputFile, options: dict[str, Any]) -> Source:
    """The source for one file; ``options`` carry the column map (Parquet) and the image
    preprocessing (images). A file that cannot be opened raises :class:`BadInput`."""
    try:
        if file.kind == "parquet":
            from samebits.offline.parquet import ParquetSource  # pyarrow only where a Parquet file is read

            return ParquetSource(file, options["columns"])
        if file.kind == "images":
            return ImageSource(file, options["image"])
        return TensorFile(file)
    except BadInput:
        raise
    except Exception as exc:
        raise BadInput(first_line(exc)) from None
