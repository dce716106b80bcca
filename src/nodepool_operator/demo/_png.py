"""A PNG encoder for 8-bit RGB images: enough for the report's chart, with no dependency.

PNG is a signature and three chunks: IHDR (size and pixel format), IDAT (the rows, each
prefixed by a filter byte, deflated with zlib) and IEND. Filter 0 ("none") on every row keeps
the encoder trivial; a chart of flat colours compresses well without better filters.
"""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_RGB = 2  # PNG colour type 2: truecolour, three samples per pixel


def encode_png(width: int, height: int, rgb: bytes | bytearray) -> bytes:
    """The PNG file of a ``width`` x ``height`` image, ``rgb`` holding its rows top to bottom.

    Raises:
        ValueError: if ``rgb`` is not ``width * height * 3`` bytes long.
    """
    stride = width * 3
    if width <= 0 or height <= 0 or len(rgb) != stride * height:
        raise ValueError(f"need {width}x{height}x3 = {stride * height} bytes, got {len(rgb)}")
    raw = b"".join(b"\x00" + bytes(rgb[y * stride : (y + 1) * stride]) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, _RGB, 0, 0, 0)
    return (
        SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
