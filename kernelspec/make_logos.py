"""Draw the kernel's logos: logo-svg.svg, logo-32x32.png and logo-64x64.png.

    python kernelspec/make_logos.py          # rewrite the three files beside this script
    python kernelspec/make_logos.py --check  # exit 1 if a committed file differs

A WebAssembly-purple rounded square with the WebAssembly logo's notch in its top
edge and a white "W" stroke. One geometry (in a 64x64 box) feeds both the SVG and a
small rasterizer, so the PNGs need nothing beyond the standard library (zlib and
struct): each pixel is the coverage of 8x8 samples, and the output is byte for byte
the same on every machine.
"""

from __future__ import annotations

import math
import struct
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

PURPLE = (0x65, 0x4F, 0xF0)  # WebAssembly's purple
WHITE = (0xFF, 0xFF, 0xFF)

BOX = 64.0
INSET, RADIUS = 2.0, 12.0  # the rounded square: (2, 2) to (62, 62), corner radius 12
NOTCH_CENTER, NOTCH_RADIUS = (32.0, INSET), 9.0  # a half-disc bitten out of the top edge
W_POINTS = [(13.0, 25.0), (22.5, 51.0), (32.0, 31.0), (41.5, 51.0), (51.0, 25.0)]
W_STROKE = 7.0  # round caps and joins
SAMPLES = 8  # per pixel and axis


def svg() -> str:
    lo, hi, r = INSET, BOX - INSET, RADIUS
    cx, cy = NOTCH_CENTER
    nr = NOTCH_RADIUS
    square = (
        f"M{lo + r:g} {lo:g}H{cx - nr:g}A{nr:g} {nr:g} 0 0 0 {cx + nr:g} {cy:g}H{hi - r:g}"
        f"A{r:g} {r:g} 0 0 1 {hi:g} {lo + r:g}V{hi - r:g}A{r:g} {r:g} 0 0 1 {hi - r:g} {hi:g}"
        f"H{lo + r:g}A{r:g} {r:g} 0 0 1 {lo:g} {hi - r:g}V{lo + r:g}A{r:g} {r:g} 0 0 1 {lo + r:g} {lo:g}Z"
    )
    points = " ".join(f"{x:g},{y:g}" for x, y in W_POINTS)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 {BOX:g} {BOX:g}">\n'
        f'  <path d="{square}" fill="{_hex(PURPLE)}"/>\n'
        f'  <polyline points="{points}" fill="none" stroke="{_hex(WHITE)}" stroke-width="{W_STROKE:g}"'
        f' stroke-linecap="round" stroke-linejoin="round"/>\n'
        "</svg>\n"
    )


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _in_square(x: float, y: float) -> bool:
    lo, hi, r = INSET, BOX - INSET, RADIUS
    if not (lo <= x <= hi and lo <= y <= hi):
        return False
    if math.hypot(x - NOTCH_CENTER[0], y - NOTCH_CENTER[1]) < NOTCH_RADIUS:
        return False
    # Outside a corner's quarter disc?
    cx = min(max(x, lo + r), hi - r)
    cy = min(max(y, lo + r), hi - r)
    return math.hypot(x - cx, y - cy) <= r


def _in_w(x: float, y: float) -> bool:
    half = W_STROKE / 2
    for (ax, ay), (bx, by) in zip(W_POINTS, W_POINTS[1:]):
        dx, dy = bx - ax, by - ay
        t = min(1.0, max(0.0, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy)))
        if math.hypot(x - ax - t * dx, y - ay - t * dy) <= half:
            return True
    return False


def render(size: int) -> bytes:
    """RGBA rows of the logo at size x size pixels."""
    scale = BOX / size
    rows = bytearray()
    for py in range(size):
        rows.append(0)  # PNG filter type: none
        for px in range(size):
            square = w = 0
            for sy in range(SAMPLES):
                y = (py + (sy + 0.5) / SAMPLES) * scale
                for sx in range(SAMPLES):
                    x = (px + (sx + 0.5) / SAMPLES) * scale
                    if _in_w(x, y):
                        w += 1
                    elif _in_square(x, y):
                        square += 1
            n = SAMPLES * SAMPLES
            alpha = (square + w) / n
            if alpha == 0:
                rows += b"\0\0\0\0"
                continue
            # Colour is the coverage-weighted mix of what covers the pixel.
            rgb = [round((square * p + w * q) / (square + w)) for p, q in zip(PURPLE, WHITE)]
            rows += bytes([*rgb, round(255 * alpha)])
    return bytes(rows)


def png(size: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(render(size), 9)) + chunk(b"IEND", b"")


def outputs() -> dict[str, bytes]:
    return {
        "logo-svg.svg": svg().encode(),
        "logo-32x32.png": png(32),
        "logo-64x64.png": png(64),
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, data in outputs().items():
        path = HERE / name
        if check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(name)
        else:
            path.write_bytes(data)
    if stale:
        print(f"make_logos.py: out of date: {', '.join(stale)} (run python kernelspec/make_logos.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
