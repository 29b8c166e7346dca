"""Checks that a drawn plot can be read: its legend covers no data, and all of it shows.

Shared by the tests of the experiment figures (``skueue.sim.figures``) and of the
analysis plots (``skueue.analysis.plots``).
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle


def the_axes(figure: Figure) -> Axes:
    (ax,) = figure.axes
    figure.canvas.draw()  # lays out the legend and the ticks
    return ax


def assert_legend_covers_no_data(figure: Figure) -> None:
    """No point of a line and no bar lies under the legend, and the legend is in the
    figure (not cut off at its edge)."""
    ax = the_axes(figure)
    legend = ax.get_legend()
    assert legend is not None, "the plot has a legend"
    box = legend.get_window_extent()
    assert figure.bbox.contains(box.x0, box.y0) and figure.bbox.contains(box.x1, box.y1), (
        "the legend is cut off"
    )
    for line in ax.get_lines():
        # A line's own transform: an axhline's x is in axes coordinates, not data.
        to_screen = line.get_transform()
        for x, y in drawn_points(line.get_xydata(), line.get_drawstyle()):
            px, py = to_screen.transform((x, y))
            assert not box.contains(px, py), f"the legend covers {line.get_label()} at {x}"
    for bar in ax.patches:
        if isinstance(bar, Rectangle) and bar.get_height():
            assert not box.overlaps(bar.get_window_extent()), "the legend covers a bar"


SAMPLES_PER_SEGMENT = 50


def drawn_points(xy: Any, drawstyle: str) -> list[tuple[float, float]]:
    """Points along the line as drawn: its vertices and what joins them (a step first
    runs level, then rises, for ``steps-post``), so a legend over a segment is caught."""
    vertices = [(float(x), float(y)) for x, y in xy if math.isfinite(x) and math.isfinite(y)]
    out = list(vertices)
    for (x0, y0), (x1, y1) in zip(vertices, vertices[1:], strict=False):
        legs = ([((x0, y0), (x1, y0)), ((x1, y0), (x1, y1))] if drawstyle == "steps-post"
                else [((x0, y0), (x1, y1))])
        for (ax0, ay0), (ax1, ay1) in legs:
            for k in range(1, SAMPLES_PER_SEGMENT):
                t = k / SAMPLES_PER_SEGMENT
                out.append((ax0 + t * (ax1 - ax0), ay0 + t * (ay1 - ay0)))
    return out


def assert_lines_inside_the_axes(figure: Figure) -> None:
    """Every finite point of every line is within the axes' limits."""
    ax = the_axes(figure)
    (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    for line in ax.get_lines():
        for x, y in line.get_xydata():
            if math.isfinite(x) and math.isfinite(y):
                assert x0 <= x <= x1 and y0 <= y <= y1, (
                    f"{line.get_label()} at ({x}, {y}) is off the axes "
                    f"{(x0, x1)} x {(y0, y1)}"
                )
