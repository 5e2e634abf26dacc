"""The card that stands for a picture a configuration does not draw (an image plot that vanished from one
revision would look like a tool that forgot it). Drawn with Pillow alone: the DVC stage process that writes it
finds everything else in the store, and importing matplotlib would be a third of its time."""

from __future__ import annotations

import textwrap
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

CARD_SIZE = (600, 160)
CHARACTERS_PER_LINE = 64


def absent_card(path: str | Path, title: str, reason: str) -> Path:
    """A 600x160 PNG at `path`: the picture's title, and `reason`: why this configuration does not draw it."""
    width, height = CARD_SIZE
    image = Image.new("RGB", CARD_SIZE, "white")
    draw = ImageDraw.Draw(image)
    draw.text((width / 2, 40), title, fill="black", font=ImageFont.load_default(size=20), anchor="mm")
    body = "\n".join(textwrap.wrap(reason, CHARACTERS_PER_LINE))
    draw.multiline_text((width / 2, 105), body, fill="dimgray", font=ImageFont.load_default(size=15), anchor="mm", align="center")
    image.save(path, format="PNG")
    return Path(path)
