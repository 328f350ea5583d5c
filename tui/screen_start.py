"""A new screen styled once, not three times: its breakpoint classes given as it composes, and its first
ScreenResume told not to style it all again.

Textual styles each widget as it mounts. Then, for a screen just pushed (or switched to), it styled every
widget mounted so far again, twice, to no effect:

- on the screen's first Resize, which adds the breakpoint classes (`-narrow`/`-wide`, `-short`/`-tall`:
  ServedrillApp's HORIZONTAL_ and VERTICAL_BREAKPOINTS) after the widgets were styled: a class change on
  the screen restyles all of them. `preset` computes the same classes from the app's size in compose,
  before any widget exists, so the Resize finds nothing to change (should the size differ by then,
  Textual's Resize sets the right ones, as before);
- on the screen's first ScreenResume, which Textual posts as it pushes a screen and handles by restyling
  the whole screen (`refresh_styles`, meant for a screen coming back from the background, whose styles
  may be stale). A screen being shown for the first time was styled moments ago. `first_resume`, called
  from the screen's `on_screen_resume` (Textual calls a subclass's handler before Screen's own), clears
  the event's `refresh_styles` that first time only; every later resume restyles as before.

Measured on the way to the workspace (120x36): 10 widgets of the picker, 14 of the briefing and 36 of the
workspace were styled twice more each, with the component classes of each DataTable, TextArea and Tree.
"""

from __future__ import annotations

import weakref
from typing import Any

from textual import events
from textual.screen import Screen

_resumed: weakref.WeakSet[Screen[Any]] = weakref.WeakSet()
"""Screens whose first ScreenResume has been seen."""


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
    one change. Call from compose: the screen's widgets are not there yet to be styled again."""
    classes = breakpoint_classes(screen, screen.app.size.width, screen.app.size.height)
    screen.update_classes({**classes, **(extra or {})}, animate=False)


def first_resume(screen: Screen[Any], event: events.ScreenResume) -> None:
    """Call from `screen`'s on_screen_resume: its first resume (it is being shown for the first time, its
    widgets just styled) does not restyle it; later ones do."""
    if screen not in _resumed:
        _resumed.add(screen)
        event.refresh_styles = False
