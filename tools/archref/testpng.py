#!/usr/bin/env python3
"""testpng: writes the small RGB test pictures of tests/fixtures/vision (qwen3vl-*.png) with
Python's zlib alone: a red ramp left to right, a green ramp top to bottom, blue in 4 x 4
checks, a white top row and a blue left column (so that a flip or a transpose shows).

    testpng.py OUT.png WIDTH HEIGHT
"""
import struct
import sys
import zlib


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def picture(width, height):
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter: none
        for x in range(width):
            r, g = x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1)
            b = 200 if (x // 4 + y // 4) % 2 else 40
            if y == 0:
                r = g = b = 255
            if x == 0:
                r, g, b = 0, 0, 255
            rows += bytes((r, g, b))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    with open(sys.argv[1], "wb") as f:
        f.write(picture(int(sys.argv[2]), int(sys.argv[3])))
