"""The media a tool or prompt returns: :class:`Image` and :class:`Audio`
(bytes or a file, its MIME type guessed). Imported on first use (they are
attrs classes, about a millisecond each to build at start-up); the
conversions of :mod:`._content` know them by their base, ``_Media``."""

from __future__ import annotations

import base64
import os
from typing import ClassVar, Final

import attrs
from msgspec import UNSET, UnsetType

from ..protocol import Annotations, AudioContent, ImageContent
from ._content import OCTET_STREAM, _Media

__all__ = ["Audio", "Image"]

_SUFFIX_MIME: Final = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
    ".bmp": "image/bmp",
    ".ico": "image/x-icon",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".avif": "image/avif",
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".oga": "audio/ogg",
    ".opus": "audio/opus",
    ".flac": "audio/flac",
    ".m4a": "audio/mp4",
    ".aac": "audio/aac",
    ".weba": "audio/webm",
}


def _sniff(data: bytes, kind: str) -> str | None:
    """The MIME type of a few common image / audio formats, by magic number."""
    if kind == "image":
        if data.startswith(b"\x89PNG\r\n\x1a\n"):
            return "image/png"
        if data.startswith(b"\xff\xd8\xff"):
            return "image/jpeg"
        if data.startswith((b"GIF87a", b"GIF89a")):
            return "image/gif"
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return "image/webp"
        if data.startswith(b"BM"):
            return "image/bmp"
    else:
        if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
            return "audio/wav"
        if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
            return "audio/mpeg"
        if data.startswith(b"OggS"):
            return "audio/ogg"
        if data.startswith(b"fLaC"):
            return "audio/flac"
    return None


@attrs.frozen
class _File(_Media):
    """Binary media from bytes or a file path (``str`` or ``os.PathLike``).

    A path is read when the value is converted to content, synchronously.
    ``mime_type`` defaults to a guess from the file suffix, then from the
    data's magic number, then ``application/octet-stream``.
    """

    _kind: ClassVar[str]

    data: bytes | str | os.PathLike[str]
    mime_type: str | None = None
    annotations: Annotations | UnsetType = attrs.field(default=UNSET, kw_only=True)

    def read(self) -> bytes:
        """The raw bytes (reading the file if given a path)."""
        if isinstance(self.data, (bytes, bytearray, memoryview)):
            return bytes(self.data)
        with open(self.data, "rb") as f:
            return f.read()

    def _mime(self, data: bytes) -> str:
        if self.mime_type:
            return self.mime_type
        if not isinstance(self.data, (bytes, bytearray, memoryview)):
            suffix = os.path.splitext(os.fspath(self.data))[1].lower()
            guessed = _SUFFIX_MIME.get(suffix)
            if guessed is None:
                import mimetypes  # on first use: most servers never guess a type

                guessed = mimetypes.guess_type(os.fspath(self.data))[0]
            if guessed:
                return guessed
        return _sniff(data, self._kind) or OCTET_STREAM

    def encoded(self) -> tuple[str, str]:
        """``(base64 data, MIME type)``."""
        data = self.read()
        return base64.b64encode(data).decode("ascii"), self._mime(data)


@attrs.frozen
class Image(_File):
    """An image to return from a tool or prompt: ``Image(b"...",
    "image/png")`` or ``Image("chart.png")``. Becomes :class:`ImageContent`."""

    _kind: ClassVar[str] = "image"

    def to_content(self) -> ImageContent:
        data, mime = self.encoded()
        return ImageContent(data=data, mime_type=mime, annotations=self.annotations)


@attrs.frozen
class Audio(_File):
    """Audio to return from a tool or prompt: ``Audio(b"...", "audio/wav")``
    or ``Audio("clip.mp3")``. Becomes :class:`AudioContent`."""

    _kind: ClassVar[str] = "audio"

    def to_content(self) -> AudioContent:
        data, mime = self.encoded()
        return AudioContent(data=data, mime_type=mime, annotations=self.annotations)
