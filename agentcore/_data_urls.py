"""``data:`` URLs for images in rendered HTML (the HTML export and notebook display).

Session data never goes into a URL as is: :func:`image_data_url` builds one only from an
allow-listed image type and data that is valid base64, and otherwise says why not, so that the
caller shows a placeholder instead. SVG is left out on purpose (it is a document that can hold
script and links); so is every non-image type.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Optional, Tuple

__all__ = ["IMAGE_TYPES", "image_data_url"]

#: The image types rendered inline; any other image becomes a placeholder.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")

_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}\Z")
_WHITESPACE = re.compile(r"\s+")


def image_data_url(mime: Any, data: Any) -> Tuple[Optional[str], str]:
    """``(url, mime)`` for an acceptable image, else ``(None, why)``.

    ``url`` is ``data:<type>;base64,<data>`` with the type lower-cased and line breaks taken out of
    the data, so it holds only ``[a-z/]`` and ``[A-Za-z0-9+/=]``. ``why`` is a sentence for the
    placeholder (it quotes the rejected type, so escape it like any session text). Never raises.
    """
    if not isinstance(mime, str) or mime.strip().lower() not in IMAGE_TYPES:
        shown = repr(mime if not isinstance(mime, str) or len(mime) <= 60 else mime[:59] + "\u2026")
        return None, f"type {shown} is not one of {', '.join(IMAGE_TYPES)}"
    kind = mime.strip().lower()
    compact = _WHITESPACE.sub("", data) if isinstance(data, str) else ""
    if not compact or len(compact) % 4 or not _BASE64.match(compact):
        return None, "its data is not valid base64"
    try:
        base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None, "its data is not valid base64"
    return f"data:{kind};base64,{compact}", kind
