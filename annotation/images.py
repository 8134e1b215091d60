"""Figure images: validation, standard size, and a sharpness measure."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from PIL import Image, UnidentifiedImageError

ACCEPTED_FORMATS = {"JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF"}


class BadImage(ValueError):
    """Not an image, an unsupported or lying format, or a decompression bomb."""


@dataclass(frozen=True)
class PreparedFigure:
    content: bytes
    extension: str
    width: int
    height: int
    sharpness: float | None


def open_image(content: bytes, *, name: str = "image") -> Image.Image:
    """Opens and fully decodes an image, turning every failure into BadImage."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(content))
            if image.format not in ACCEPTED_FORMATS:
                raise BadImage(f"{name}: {image.format or 'unknown'} images are not accepted")
            image.load()
    except BadImage:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise BadImage(f"{name}: not a usable image ({exc.__class__.__name__})") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise BadImage(f"{name}: the image data is damaged ({exc})") from None
    return image


def sharpness(image: Image.Image) -> float | None:
    """Variance of the Laplacian over ink pixels (and their neighbours).

    Restricting to ink keeps a sharp diagram on a mostly white page from
    scoring as blurred; None when there is no ink at all.
    """
    gray = np.asarray(image.convert("L"), dtype=np.float32)
    if gray.shape[0] < 3 or gray.shape[1] < 3:
        return None
    lap = gray[:-2, 1:-1] + gray[2:, 1:-1] + gray[1:-1, :-2] + gray[1:-1, 2:] - 4 * gray[1:-1, 1:-1]
    # Ink is whatever stands out from the paper; a fixed threshold would lose
    # the strokes of a blurred figure, which are exactly the ones to catch.
    ink = gray < float(np.median(gray)) - 25
    # grow the ink mask by one pixel so the edges around strokes count
    near = ink.copy()
    near[1:, :] |= ink[:-1, :]
    near[:-1, :] |= ink[1:, :]
    near[:, 1:] |= ink[:, :-1]
    near[:, :-1] |= ink[:, 1:]
    mask = near[1:-1, 1:-1]
    if mask.sum() < 20:
        return None
    return float(lap[mask].var())


def prepare_figure(content: bytes, *, name: str = "figure") -> PreparedFigure:
    """Validates an image and stores it at the standard size (never enlarged)."""
    image = open_image(content, name=name)
    is_jpeg = image.format == "JPEG"
    image = image.convert("RGB") if image.mode not in ("RGB", "L") else image
    side = settings.FIGURE_STANDARD_SIDE_PX
    if max(image.size) > side:
        image.thumbnail((side, side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    if is_jpeg:
        image.save(buffer, "JPEG", quality=90)
    else:
        image.save(buffer, "PNG", optimize=False)
    return PreparedFigure(
        content=buffer.getvalue(),
        extension="jpg" if is_jpeg else "png",
        width=image.width,
        height=image.height,
        sharpness=sharpness(image),
    )
