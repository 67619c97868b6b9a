"""`fray plot --png`: a run's curves as a PNG, drawn and encoded with the standard library (zlib).

Why not matplotlib: it is a large dependency for one report image, and
plotext (which draws the terminal plot) cannot write PNG. A chart of lines,
markers and tick numbers needs only a pixel buffer, a line rasteriser and a
3x5 digit font; PNG is a zlib stream with a small header. The image has two
panels, the metric against step (top) and against wall time (bottom): one
colour per attempt (the terminal's order), restarts as red vertical lines,
checkpoints as white squares, NaN/inf as red crosses along the top. Each panel's
axes are titled (the metric above its y axis, `STEP` or `SECONDS SINCE SUBMIT`
under its x axis) in capitals of the same font; the legend's words go in the PNG's
tEXt chunks.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

RGB = tuple[int, int, int]
BACKGROUND: RGB = (24, 24, 32)
AXIS: RGB = (160, 160, 170)
RESTART: RGB = (230, 60, 60)
CHECKPOINT: RGB = (250, 250, 250)
# the terminal's attempt colours (fray.ops.curves.COLOURS) as RGB
COLOURS: tuple[RGB, ...] = ((0, 200, 220), (255, 150, 30), (60, 200, 80), (220, 80, 220), (80, 120, 255),
                            (230, 60, 60), (230, 220, 60))
MARGIN_LEFT, MARGIN_BOTTOM, MARGIN = 56, 14, 10
# 3x5 glyphs, rows top to bottom, "1" = ink
FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001010010010",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "-": "000000111000000",
    "e": "000111111100111", "+": "000010111010000",
    # capitals, for the axis titles (a lower-case "e" above is the exponent's: 1e-03)
    "A": "010101111101101", "B": "110101110101110", "C": "011100100100011", "D": "110101101101110",
    "E": "111100110100111", "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101", "L": "100100100100111",
    "M": "101111111101101", "N": "110101101101101", "O": "010101101101010", "P": "110101110100100",
    "Q": "010101101110011", "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101", "X": "101101010101101",
    "Y": "101101010010010", "Z": "111001010100111", "_": "000000000000111", "/": "001001010100100",
    "(": "010100100100010", ")": "010001001001010", " ": "000000000000000",
}
GLYPH_WIDTH = 8  # 3 columns scaled 2x, and a gap of 2


class Canvas:
    """A width x height RGB buffer with the few drawing calls a chart needs."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(BACKGROUND) * width * height)

    def dot(self, x: int, y: int, colour: RGB) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            at = (y * self.width + x) * 3
            self.pixels[at:at + 3] = bytes(colour)

    def line(self, x0: int, y0: int, x1: int, y1: int, colour: RGB) -> None:
        """Bresenham's line from (x0, y0) to (x1, y1)."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        error = dx + dy
        while True:
            self.dot(x0, y0, colour)
            if x0 == x1 and y0 == y1:
                return
            twice = 2 * error
            if twice >= dy:
                error, x0 = error + dy, x0 + sx
            if twice <= dx:
                error, y0 = error + dx, y0 + sy

    def square(self, x: int, y: int, half: int, colour: RGB) -> None:
        for i in range(-half, half + 1):
            self.dot(x + i, y - half, colour)
            self.dot(x + i, y + half, colour)
            self.dot(x - half, y + i, colour)
            self.dot(x + half, y + i, colour)

    def text(self, x: int, y: int, text: str, colour: RGB) -> None:
        """`text` in the 3x5 font, scaled 2x, its top left at (x, y); characters it lacks are left out."""
        for char in text:
            glyph = FONT.get(char)
            if glyph is None:
                continue
            for row in range(5):
                for col in range(3):
                    if glyph[row * 3 + col] == "1":
                        for ox in (0, 1):
                            for oy in (0, 1):
                                self.dot(x + col * 2 + ox, y + row * 2 + oy, colour)
            x += GLYPH_WIDTH

    def png(self, texts: dict[str, str]) -> bytes:
        rows = b"".join(b"\x00" + bytes(self.pixels[y * self.width * 3:(y + 1) * self.width * 3])
                        for y in range(self.height))
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)  # 8-bit RGB
        chunks = [_chunk(b"IHDR", header)]
        chunks += [_chunk(b"tEXt", key.encode("latin-1") + b"\x00" + value.encode("latin-1", "replace"))
                   for key, value in texts.items()]
        chunks += [_chunk(b"IDAT", zlib.compress(rows, 9)), _chunk(b"IEND", b"")]
        return b"\x89PNG\r\n\x1a\n" + b"".join(chunks)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _label(value: float) -> str:
    return f"{value:.3g}"


def axis_titles(metric: str, axis: str) -> tuple[str, str]:
    """(x title, y title) of a panel, in the font's capitals."""
    return ("STEP" if axis == "step" else "SECONDS SINCE SUBMIT"), metric.upper()


def _panel(canvas: Canvas, view: dict[str, Any], axis: str, top: int, height: int) -> None:
    key = "steps" if axis == "step" else "times"
    mark_key = "step" if axis == "step" else "time"
    xs = [x for c in view["attempts"] for x in c[key]]
    ys = [y for c in view["attempts"] for y in c["values"]]
    left, right = MARGIN_LEFT, canvas.width - MARGIN
    bottom = top + height - MARGIN_BOTTOM
    canvas.line(left, top, left, bottom, AXIS)
    canvas.line(left, bottom, right, bottom, AXIS)
    x_title, y_title = axis_titles(view["metric"], axis)
    canvas.text((left + right - GLYPH_WIDTH * len(x_title)) // 2, bottom + 3, x_title, AXIS)  # between the ticks
    canvas.text(left + 6, top - MARGIN, y_title, AXIS)  # above the y axis, in the margin over the panel
    if not xs:
        return
    x_lo, x_hi = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    x_span, y_span = (x_hi - x_lo) or 1.0, (y_hi - y_lo) or 1.0

    def px(x: float) -> int:
        return left + round((x - x_lo) / x_span * (right - left - 4)) + 2

    def py(y: float) -> int:
        return bottom - 2 - round((y - y_lo) / y_span * (bottom - top - 4))

    canvas.text(2, top, _label(y_hi), AXIS)
    canvas.text(2, bottom - 10, _label(y_lo), AXIS)
    canvas.text(left, bottom + 3, _label(x_lo), AXIS)
    canvas.text(right - GLYPH_WIDTH * len(_label(x_hi)), bottom + 3, _label(x_hi), AXIS)
    for restart in view["restarts"]:
        x = px(restart[mark_key])
        canvas.line(x, top, x, bottom - 1, RESTART)
    for curve in view["attempts"]:
        colour = COLOURS[(curve["attempt"] - 1) % len(COLOURS)]
        points = [(px(x), py(y)) for x, y in zip(curve[key], curve["values"])]
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            canvas.line(x0, y0, x1, y1, colour)
        if len(points) == 1:
            canvas.square(*points[0], 1, colour)
    for mark in view["checkpoints"]:
        canvas.square(px(mark[mark_key]), py(mark["value"]), 3, CHECKPOINT)
    for point in view["not_finite"]:
        x, y = px(point[mark_key]), top + 4
        canvas.line(x - 3, y - 3, x + 3, y + 3, RESTART)
        canvas.line(x - 3, y + 3, x + 3, y - 3, RESTART)


def chart_png(view: dict[str, Any], width: int = 900, height: int = 640) -> bytes:
    """The PNG bytes of `view` (fray.ops.curves.curves_view): against step on top, against wall time below."""
    canvas = Canvas(width, height)
    half = height // 2
    _panel(canvas, view, "step", MARGIN, half - MARGIN)
    _panel(canvas, view, "time", half + MARGIN, half - MARGIN)
    legend = ", ".join(f"{c.get('label') or 'attempt ' + str(c['attempt'])}: rgb{COLOURS[(c['attempt'] - 1) % len(COLOURS)]}"
                       for c in view["attempts"])
    return canvas.png({"Title": f"{view['name']} ({view['run_id']}): {view['metric']}",
                       "Description": f"top: {view['metric']} by step; bottom: by seconds since submit. {legend}. "
                                      "Red lines: restarts; white squares: checkpoints; red crosses: NaN/inf."})
