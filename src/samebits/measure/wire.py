"""The one transport between samebits and its child processes. A message is a JSON header and
optional named tensors (safetensors bytes, never pickles), framed on a byte stream: a 4-byte
big-endian header length, an 8-byte big-endian tensor length, the header, then the tensors."""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

_LENGTHS = struct.Struct(">IQ")
HEADER_LIMIT = 1 << 28  # 256 MiB of JSON: more is a stream that is not this protocol
BODY_LIMIT = 1 << 40  # 1 TiB of tensors: more is a stream that is not this protocol


class Readable(Protocol):
    """What a message is read from: a binary stream, or anything with its ``read``."""

    def read(self, size: int, /) -> bytes: ...


@dataclasses.dataclass(frozen=True)
class Message:
    """One message: its JSON header and its named tensors (none for most)."""

    header: dict[str, Any]
    tensors: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)


def write_message(stream: IO[bytes], message: Message) -> None:
    """``message`` on ``stream``, flushed (both ends use this)."""
    head = json.dumps(message.header).encode()
    body = b""
    if message.tensors:
        from safetensors.torch import save

        body = save(_apart(message.tensors))
    stream.write(_LENGTHS.pack(len(head), len(body)) + head)
    if body:
        stream.write(body)  # apart: the tensors' bytes are not copied once more
    stream.flush()


def read_message(stream: Readable) -> Message:
    """One message from ``stream``; ``EOFError`` where the stream ends first (the other side is
    gone), ``ValueError`` where what it reads is not this protocol."""
    lengths = _read(stream, _LENGTHS.size)
    head_size, body_size = _LENGTHS.unpack(lengths)
    if head_size > HEADER_LIMIT or body_size > BODY_LIMIT:
        raise ValueError(f"a message of {head_size} + {body_size} bytes: the stream does not speak samebits' protocol")
    header = json.loads(_read(stream, head_size))
    if not isinstance(header, dict):
        raise ValueError("a message header that is no JSON object")
    tensors: dict[str, torch.Tensor] = {}
    if body_size:
        from safetensors.torch import load

        tensors = load(_read(stream, body_size))
    return Message(header, tensors)


def _apart(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous tensors that share no storage (safetensors refuses shared memory, and a model's
    outputs often share it: hidden states, views): a tensor whose storage an earlier one uses is
    copied."""
    seen: set[int] = set()
    out = {}
    for name, t in tensors.items():
        t = t.detach().contiguous()
        where = t.untyped_storage().data_ptr()
        if where in seen:
            t = t.clone()
        seen.add(where)
        out[name] = t
    return out


def _read(stream: Readable, size: int) -> bytes:
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the stream ended" if not data else "the stream ended mid-message")
    return data


class Channel:
    """Both directions of a conversation: messages read from ``reader``, written to ``writer``."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self.reader, self.writer = reader, writer

    def send(self, message: Message) -> None:
        write_message(self.writer, message)

    def receive(self) -> Message:
        """The next message; ``EOFError`` once the other side closed its end."""
        return read_message(self.reader)
