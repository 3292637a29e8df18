"""``-a/--attach PATH`` (``run``/``chat``) and chat's ``/attach PATH``: files sent with a prompt.

The kind of a file is sniffed from its bytes, never from its name: PNG, JPEG, GIF and WebP magic
numbers make an image (an :class:`~agentcore.types.ImageContent` of the prompt); bytes that decode
as UTF-8 (without NUL bytes) make a text attachment, written into the prompt text as the reference
coding agent writes its ``@file`` arguments::

    <file name="/abs/path/notes.md">
    ...the file's text...
    </file>

An image also gets an empty ``<file name="...">`` line, so the model knows which file it sees. The
attachments come before the prompt text, in command-line order. ``-`` reads stdin (its bytes are
sniffed the same way; its name is ``<stdin>``).

Every problem is a :class:`~agentcore.cli._setup.UsageError` naming the file (exit 2, nothing
sent): a missing or unreadable file (a URL is not fetched: the message says to download it, and
shows the URL as :func:`~agentcore._safe.redact_url` does, without a password or a query token),
a directory, a file over :data:`MAX_ATTACHMENT_BYTES`, a stdin (``-``) that is closed, unreadable
or empty, bytes that are neither a supported image nor UTF-8 text (the message names the sniffed
type, e.g. ``application/pdf``), and an image for a model whose ``input`` lacks ``"image"``
(:func:`check_model_input`; providers would otherwise drop the image silently).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, List, Optional, Sequence, Tuple

from .._safe import redact_url
from ._commands import path_word
from ._setup import UsageError

__all__ = [
    "MAX_ATTACHMENT_BYTES",
    "STDIN_NAME",
    "Attachment",
    "Attachments",
    "sniff_image",
    "sniff_kind",
    "read_attachment",
    "read_attachments",
    "check_model_input",
    "prompt_with",
    "attach_command",
]

#: The largest file ``--attach`` takes (bytes): the providers' own image limits are 5-20 MB, and a
#: text file beyond this would not fit a context window anyway.
MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
#: The name ``-a -`` gives stdin in the ``<file name=...>`` block.
STDIN_NAME = "<stdin>"

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

# other well-known signatures, named in the error for a file that is neither image nor text
_OTHER_MAGIC: Tuple[Tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"\x7fELF", "application/x-executable (ELF)"),
    (b"BM", "image/bmp (not supported: convert it to PNG)"),
    (b"II*\x00", "image/tiff (not supported: convert it to PNG)"),
    (b"MM\x00*", "image/tiff (not supported: convert it to PNG)"),
    (b"\x00\x00\x01\x00", "image/x-icon (not supported: convert it to PNG)"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"\x1aE\xdf\xa3", "video/webm"),
)


@dataclass
class Attachment:
    """One attached file: ``text`` for a text file, ``image`` for an image (never both)."""

    name: str  # the absolute path, or STDIN_NAME
    size: int
    text: Optional[str] = None
    image: Any = None  # an agentcore.types.ImageContent

    def block(self) -> str:
        """The ``<file name=...>`` text the prompt carries for this attachment. The name is the
        path's bytes read as UTF-8 (a byte that is none: U+FFFD), never the lone surrogates an
        ASCII locale or a Latin-1 file name leaves in a ``str`` path: no request can send them."""
        name = _text_name(self.name).replace('"', "&quot;")  # the attribute stays one attribute
        if self.text is None:
            return f'<file name="{name}"></file>\n'
        body = self.text[:-1] if self.text.endswith("\n") else self.text  # one newline before </file>
        return f'<file name="{name}">\n{body}\n</file>\n'


def _text_name(path: str) -> str:
    try:
        return os.fsencode(path).decode("utf-8", "replace")
    except UnicodeError:  # real characters an ASCII file system encoding lacks (a typed /attach): text already
        return path.encode("utf-8", "replace").decode("utf-8")


@dataclass
class Attachments:
    """The attachments of one prompt, in command-line order."""

    items: List[Attachment] = field(default_factory=list)

    @property
    def images(self) -> List[Any]:
        return [a.image for a in self.items if a.image is not None]

    def __bool__(self) -> bool:
        return bool(self.items)

    def describe(self) -> str:
        """``name (N bytes, image/png), ...`` for notices."""
        return ", ".join(
            f"{os.path.basename(a.name) or a.name} ({a.size} bytes, {a.image.mime_type if a.image else 'text'})"
            for a in self.items
        )


def sniff_image(data: bytes) -> Optional[str]:
    """The mime type of a PNG, JPEG, GIF or WebP image in ``data`` (its first bytes), else None:
    the sniffing of the ``read`` tool, so both take the same files as images."""
    from ..builtin_tools.read import detect_image_mime_type

    return detect_image_mime_type(data)


def sniff_kind(data: bytes) -> str:
    """A short name of what ``data`` holds, for the error about a file that is not attachable."""
    for magic, mime in _OTHER_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF":
        return f"RIFF container ({data[8:12].decode('latin-1')!r})"
    return "binary data (neither UTF-8 text nor a PNG, JPEG, GIF or WebP image)"


def _text_of(data: bytes) -> Optional[str]:
    """``data`` as text when it is UTF-8 without NUL bytes (binary formats are rarely both)."""
    if b"\x00" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text[1:] if text.startswith("\ufeff") else text  # a BOM is not part of the text


def _read_limited(handle: BinaryIO, what: str, flag: str = "--attach") -> bytes:
    """At most the limit's bytes of ``handle``; UsageError when there are more."""
    return _check_size(handle.read(MAX_ATTACHMENT_BYTES + 1), what, flag)


def _check_size(data: bytes, what: str, flag: str = "--attach") -> bytes:
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise UsageError(
            f"{flag} {what}: larger than the limit of {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MiB; "
            "attach a smaller file (or an excerpt: head -c ... FILE | agentcore run -a - ...)"
        )
    return data


def _stdin_bytes(stdin: Any) -> bytes:
    """All of stdin as bytes (its binary buffer when it has one: images arrive intact).

    UsageError when there is no stdin (descriptor 0 closed: ``<&-``), when it cannot be read
    (``0>FILE``), and when it is empty: a producer that failed (``curl ... | agentcore run -a -``)
    would otherwise send an empty file for the model to describe."""
    if stdin is None:
        raise UsageError("--attach -: there is no stdin (it is closed); pipe the file in, or attach it by name")
    buffer = getattr(stdin, "buffer", None)
    try:
        if buffer is not None:
            data = buffer.read(MAX_ATTACHMENT_BYTES + 1)
        else:
            text = stdin.read()
            data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
    except (OSError, ValueError) as exc:  # write-only, or closed in-process
        raise UsageError(f"--attach -: cannot read stdin ({getattr(exc, 'strerror', None) or exc})") from None
    if not data:
        raise UsageError("--attach -: stdin is empty (did the command piping the file fail?); nothing was sent")
    return _check_size(data, "-")


def read_attachment(path: str, stdin: Any = None, flag: str = "--attach") -> Attachment:
    """The attachment of ``path`` (``-``: stdin). UsageError naming ``flag`` (``--attach``, or
    chat's ``/attach``) and the file for any problem."""
    from ..types import ImageContent

    if path == "-":
        name = STDIN_NAME
        data = _stdin_bytes(stdin)
    else:
        name = os.path.abspath(os.path.expanduser(path_word(path)))  # chat's /attach: typed text
        if os.path.isdir(name):
            raise UsageError(f"{flag} {path}: is a directory; attach the files in it one by one")
        try:
            with open(name, "rb") as handle:
                data = _read_limited(handle, path, flag)
        except FileNotFoundError:
            if _URL.match(path):  # llm attaches URLs; here a URL was read as a relative path
                raise UsageError(
                    f"{flag} {redact_url(path)}: only local files can be attached, not URLs; download it first "
                    "(curl -o FILE URL) and attach FILE"
                ) from None
            raise UsageError(f"{flag} {path}: no such file ({name})") from None
        except OSError as exc:
            raise UsageError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from None
    mime = sniff_image(data)
    if mime is not None:
        image = ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=mime)
        return Attachment(name=name, size=len(data), image=image)
    text = _text_of(data)
    if text is None:
        raise UsageError(
            f"{flag} {path}: cannot attach {sniff_kind(data)}; attach UTF-8 text files or PNG, JPEG, GIF or WebP images"
        )
    return Attachment(name=name, size=len(data), text=text)


def read_attachments(paths: Optional[Sequence[str]], stdin: Any = None) -> Attachments:
    """The attachments of ``--attach`` values, in order; ``-`` may appear once."""
    paths = list(paths or ())
    if paths.count("-") > 1:
        raise UsageError("--attach -: stdin can be attached only once")
    return Attachments([read_attachment(p, stdin) for p in paths])


def check_model_input(model: Any, attachments: Attachments, *, local: bool = False, flag: str = "--attach") -> None:
    """UsageError when ``attachments`` hold an image and ``model`` takes no image input (the
    message starts with ``flag``: chat says ``attached``, its files come by -a or /attach).

    A model of a local server (``local``: ``--base-url`` with an id the catalog does not know)
    declares nothing, so it is taken to accept images once one is attached ("image" is added to
    its ``input``); the server itself answers an error if it does not.
    """
    if not attachments.images:
        return
    inputs = tuple(getattr(model, "input", ()) or ())
    if "image" in inputs:
        return
    if local:
        model.input = inputs + ("image",)
        return
    key = getattr(model, "key", None) or getattr(model, "id", "?")
    names = ", ".join(os.path.basename(a.name) or a.name for a in attachments.items if a.image is not None)
    raise UsageError(
        f"{flag} {names}: the model {key} takes no image input (its input: {', '.join(inputs) or 'none'}); "
        "choose a model with image input (`agentcore models --json` shows each model's input) or leave the image out"
    )


def prompt_with(attachments: Attachments, prompt: str) -> str:
    """The prompt text: the attachments' ``<file>`` blocks, then ``prompt``."""
    return "".join(a.block() for a in attachments.items) + prompt


def _one_path(arg: str) -> str:
    """The path typed after ``/attach``: quotes or backslash-escaped spaces (as a terminal's
    drag-and-drop writes them) are read as the shell would; else the text as it is."""
    import shlex

    try:
        words = shlex.split(arg)
    except ValueError:  # an unbalanced quote: a file name may hold one
        return arg
    return words[0] if len(words) == 1 else arg


def attach_command(attachments: Attachments, arg: str) -> Tuple[Attachments, str]:
    """Chat's ``/attach``: ``PATH`` adds a file for the next prompt, ``clear`` drops them all,
    nothing lists them. Returns the new attachments and the line to show; UsageError for a file
    that cannot be attached (the others stay)."""
    if arg.lower() == "clear":
        return Attachments(), "attachments dropped" if attachments else "no attachments"
    if arg:
        if arg == "-":
            raise UsageError("/attach -: chat reads its prompts from stdin; attach a file")
        added = read_attachment(os.path.expanduser(_one_path(arg)), flag="/attach")
        attachments = Attachments(attachments.items + [added])
    if not attachments:
        return attachments, "no attachments; /attach PATH sends a file with the next prompt"
    return attachments, f"with the next prompt: {attachments.describe()}"
