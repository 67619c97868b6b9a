"""TensorBoard event files read by hand: TFRecord framing and the Event / Summary protobuf (pure, stdlib).

An event file (`events.out.tfevents.*`) is a sequence of TFRecords:

    uint64 length (little-endian) | uint32 masked CRC of length | length bytes of data | uint32 masked CRC of data

and each record's data is a serialized `tensorflow.Event`. Of it only what makes a scalar curve is read:

    Event    1 wall_time (double), 2 step (int64), 5 summary (Summary)
    Summary  1 value (repeated Value)
    Value    1 tag (string), 2 simple_value (float), 8 tensor (TensorProto)
    TensorProto 1 dtype, 2 tensor_shape, 4 tensor_content (raw little-endian), 5 float_val,
             6 double_val, 7 int_val, 10 int64_val, 13 half_val (packed or not)

PyTorch's SummaryWriter (and so Lightning and HF Trainer) writes `simple_value`; TF2's tf.summary and
JAX's writers (clu, flax) write a scalar tensor. A tensor of more than one element (a histogram, an
image, text) is no scalar and is skipped, as is anything this reader does not understand: a corrupt
record ends the file's reading where it is (`Records.feed` waits for more bytes), never the wrapper.
The CRCs are not checked: they need CRC-32C, which the standard library lacks, and a torn record
fails to parse anyway.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

HEADER_BYTES = 12  # length + its CRC
FOOTER_BYTES = 4
MAX_RECORD_BYTES = 64 * 1024 * 1024  # larger is no scalar event (or a corrupt length): the file is given up
_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")
_U64 = struct.Struct("<Q")
# TensorFlow's DataType enum: the numeric types a scalar may have, with their tensor_content layout.
_CONTENT = {1: "<f", 2: "<d", 3: "<i", 4: "<B", 5: "<h", 6: "<b", 9: "<q", 10: "<?", 17: "<H", 22: "<I", 23: "<Q"}
DT_HALF, DT_BFLOAT16 = 19, 14


class Scalar(NamedTuple):
    step: int
    tag: str
    value: float


class CorruptRecord(ValueError):
    """The bytes are no TFRecord of an event: the file is not read further."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise CorruptRecord("a varint runs past its message")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of one protobuf message: an int for varint and fixed fields (fixed
    ones as their raw bytes), bytes for length-delimited ones."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 1:
            if pos + 8 > len(data):
                raise CorruptRecord("a 64-bit field runs past its message")
            yield number, wire, data[pos:pos + 8]
            pos += 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise CorruptRecord("a length-delimited field runs past its message")
            yield number, wire, data[pos:pos + size]
            pos += size
        elif wire == 5:
            if pos + 4 > len(data):
                raise CorruptRecord("a 32-bit field runs past its message")
            yield number, wire, data[pos:pos + 4]
            pos += 4
        else:
            raise CorruptRecord(f"wire type {wire} (groups are not used by events)")


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _half(bits: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def _bfloat16(bits: int) -> float:
    return _FLOAT.unpack(struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def _repeated(wire: int, value: object, kind: str) -> list[float]:
    """A repeated numeric field, packed (wire 2) or one element (wire 0, 1, 5)."""
    if kind == "float":
        raw = value if isinstance(value, bytes) else b""
        return [v for (v,) in _FLOAT.iter_unpack(raw[: len(raw) // 4 * 4])]
    if kind == "double":
        raw = value if isinstance(value, bytes) else b""
        return [v for (v,) in _DOUBLE.iter_unpack(raw[: len(raw) // 8 * 8])]
    if wire == 0:
        return [float(_signed64(value))] if isinstance(value, int) else []
    out, pos, data = [], 0, value if isinstance(value, bytes) else b""
    while pos < len(data):
        number, pos = _varint(data, pos)
        out.append(float(_signed64(number)))
    return out


def _shape_elements(data: bytes) -> int:
    """How many elements a TensorShapeProto holds (1 for a scalar; -1 when unknown)."""
    count = 1
    for number, _wire, value in fields(data):
        if number == 2 and isinstance(value, bytes):  # dim { size }
            size = next((v for n, _w, v in fields(value) if n == 1 and isinstance(v, int)), 0)
            count *= _signed64(size)
        elif number == 3 and value:  # unknown_rank
            return -1
    return count


def tensor_scalar(data: bytes) -> float | None:
    """The value of a TensorProto holding one number, else None."""
    dtype, elements, values = 0, 1, []
    content = b""
    half: list[float] = []
    for number, wire, value in fields(data):
        if number == 1 and isinstance(value, int):
            dtype = value
        elif number == 2 and isinstance(value, bytes):
            elements = _shape_elements(value)
        elif number == 4 and isinstance(value, bytes):
            content = value
        elif number == 5:
            values += _repeated(wire, value, "float")
        elif number == 6:
            values += _repeated(wire, value, "double")
        elif number in (7, 10):
            values += _repeated(wire, value, "int")
        elif number == 13:
            half += _repeated(wire, value, "int")
    if elements != 1:
        return None
    if half:
        return _bfloat16(int(half[0])) if dtype == DT_BFLOAT16 else _half(int(half[0]))
    if values:
        return float(values[0])
    layout = _CONTENT.get(dtype)
    if content and layout is not None and len(content) == struct.calcsize(layout):
        return float(struct.unpack(layout, content)[0])
    if content and dtype in (DT_HALF, DT_BFLOAT16) and len(content) == 2:
        bits = struct.unpack("<H", content)[0]
        return _bfloat16(bits) if dtype == DT_BFLOAT16 else _half(bits)
    return None


def _summary_value(data: bytes) -> tuple[str, float] | None:
    tag, value = None, None
    for number, wire, item in fields(data):
        if number == 1 and isinstance(item, bytes):
            tag = item.decode("utf-8", errors="replace")
        elif number == 2 and wire == 5 and isinstance(item, bytes):
            value = _FLOAT.unpack(item)[0]
        elif number == 8 and isinstance(item, bytes) and value is None:
            value = tensor_scalar(item)
    if tag is None or value is None:
        return None
    return tag, value


def event_scalars(data: bytes) -> list[Scalar]:
    """The scalars of one serialized Event (none for a file_version, graph or histogram event)."""
    step, summary = 0, None
    for number, _wire, value in fields(data):
        if number == 2 and isinstance(value, int):
            step = _signed64(value)
        elif number == 5 and isinstance(value, bytes):
            summary = value
    if summary is None:
        return []
    found = []
    for number, _wire, value in fields(summary):
        if number == 1 and isinstance(value, bytes):
            pair = _summary_value(value)
            if pair is not None:
                found.append(Scalar(step, pair[0], pair[1]))
    return found


class Records:
    """The records of one event file as its bytes arrive (a record cut at the end waits for the rest)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.broken: str | None = None  # why the file is not read further

    def feed(self, data: bytes) -> list[Scalar]:
        if self.broken is not None:
            return []
        self.buffer += data
        found: list[Scalar] = []
        pos = 0
        buffer = self.buffer
        while len(buffer) - pos >= HEADER_BYTES:
            (length,) = _U64.unpack_from(buffer, pos)
            if length > MAX_RECORD_BYTES:
                self.broken = f"a record of {length} bytes: not an event file, or a corrupt one"
                break
            end = pos + HEADER_BYTES + length + FOOTER_BYTES
            if end > len(buffer):
                break  # the rest is still being written
            try:
                found += event_scalars(buffer[pos + HEADER_BYTES: end - FOOTER_BYTES])
            except CorruptRecord as exc:
                self.broken = str(exc)
                break
            pos = end
        self.buffer = buffer[pos:] if self.broken is None else b""
        return found


def encode_scalar_event(step: int, tag: str, value: float, wall_time: float = 0.0, as_tensor: bool = False) -> bytes:
    """One TFRecord holding an Event with one scalar, as PyTorch's SummaryWriter writes it (`simple_value`)
    or as tf.summary.scalar does (`as_tensor`: a DT_FLOAT scalar tensor). For tests and benches."""
    def key(number: int, wire: int) -> bytes:
        return _encode_varint(number << 3 | wire)

    def length_delimited(number: int, payload: bytes) -> bytes:
        return key(number, 2) + _encode_varint(len(payload)) + payload

    tag_bytes = tag.encode("utf-8")
    if as_tensor:
        tensor = key(1, 0) + _encode_varint(1) + length_delimited(2, b"") + key(5, 5) + _FLOAT.pack(value)
        value_message = length_delimited(1, tag_bytes) + length_delimited(8, tensor)
    else:
        value_message = length_delimited(1, tag_bytes) + key(2, 5) + _FLOAT.pack(value)
    summary = length_delimited(1, value_message)
    event = key(1, 1) + _DOUBLE.pack(wall_time) + key(2, 0) + _encode_varint(step & ((1 << 64) - 1)) \
        + length_delimited(5, summary)
    return _U64.pack(len(event)) + b"\0" * 4 + event + b"\0" * 4


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
