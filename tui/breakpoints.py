"""A screen's breakpoint classes (`-narrow`/`-wide`, `-short`/`-tall`: ServedrillApp's HORIZONTAL_ and
VERTICAL_BREAKPOINTS) given as it composes, before its widgets are styled.

Textual sets them when the screen receives its first Resize, which comes after its first layout: by then
the screen's widgets have been styled, and changing the screen's classes styles every one of them again
(measured: 10 widgets of the picker, 14 of the briefing, 36 of the workspace, on the way to the workspace).
Set beforehand to the same classes, that Resize finds nothing to change and restyles nothing; should the
size differ by then, Textual's own Resize sets the right ones as before.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen


def breakpoint_classes(screen: Screen[Any], width: int, height: int) -> dict[str, bool]:
    """Each breakpoint class of `screen` and whether a `width` x `height` screen has it, as Textual's
    Screen._on_resize decides: per axis, the class of the largest breakpoint the size reaches."""
    app = screen.app
    horizontal = (app.HORIZONTAL_BREAKPOINTS if screen.HORIZONTAL_BREAKPOINTS is None
                  else screen.HORIZONTAL_BREAKPOINTS) or []
    vertical = (app.VERTICAL_BREAKPOINTS if screen.VERTICAL_BREAKPOINTS is None
                else screen.VERTICAL_BREAKPOINTS) or []
    classes = {name: False for _, name in [*horizontal, *vertical]}
    for size, points in ((width, horizontal), (height, vertical)):
        for at, name in sorted(points, reverse=True):
            if size >= at:
                classes[name] = True
                break
    return classes


def preset(screen: Screen[Any], extra: dict[str, bool] | None = None) -> None:
    """Give `screen` its breakpoint classes for the app's size now, with `extra` classes of its own, in
    one change (call from compose: the screen's widgets are not there yet to be styled again)."""
    classes = breakpoint_classes(screen, screen.app.size.width, screen.app.size.height)
    screen.update_classes({**classes, **(extra or {})}, animate=False)
