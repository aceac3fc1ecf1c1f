"""The dashboard's browser-tab icon, drawn here: a Material icon or an emoji as `page_icon` makes every
viewer's browser fetch it from a font or emoji CDN, a request off the network (a failed one without it)."""

from __future__ import annotations

import functools

from PIL import Image, ImageDraw

SIZE_PX = 64
COLOUR = (76, 120, 168, 255)  # the charts' blue (#4C78A8)


@functools.cache
def tab_icon() -> Image.Image:
    """A stopwatch: a ring, its crown and one hand (served by the dashboard itself, as a page image is)."""
    icon = Image.new("RGBA", (SIZE_PX, SIZE_PX), (0, 0, 0, 0))
    draw = ImageDraw.Draw(icon)
    centre, radius = SIZE_PX // 2, SIZE_PX * 0.36
    box = (centre - radius, centre - radius + 4, centre + radius, centre + radius + 4)
    draw.ellipse(box, outline=COLOUR, width=7)
    draw.rectangle((centre - 6, 2, centre + 6, 9), fill=COLOUR)  # the crown
    draw.line((centre, centre + 4, centre + 11, centre - 9), fill=COLOUR, width=6)  # the hand
    return icon
