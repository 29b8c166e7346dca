"""The figure every PNG plot of the project is drawn on, and where its legend goes.

We draw on a bare :class:`matplotlib.figure.Figure` with the Agg canvas instead of going
through ``pyplot``: pyplot keeps global state and picks a backend for the whole process,
which a library must not do to the program that imports it (and Agg needs no display).

Legends sit to the right of the axes, never inside them: matplotlib's "best" place
still covered data (the throughput plot's "all" line, the one bar of a one-process
storage plot), and no place inside the axes is safe for every data set.
"""

from __future__ import annotations

from typing import Any, Final

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

SIZE_INCHES: Final = (8.0, 4.5)
"""Wide enough for the legend beside a plot of the former 7 x 4.5 inches' axes."""
DPI: Final = 100


def new_figure() -> Figure:
    figure = Figure(figsize=SIZE_INCHES, dpi=DPI)
    FigureCanvasAgg(figure)  # attaches itself; savefig then renders with Agg
    return figure


def legend_outside(ax: Axes, **options: Any) -> None:
    """The axes' legend to the right of them, top-aligned (``tight_layout`` makes room)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              fontsize="small", **options)
