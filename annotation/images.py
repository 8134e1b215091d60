"""Figure images: validation, standard size, and a sharpness measure."""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from PIL import Image, UnidentifiedImageError

from k12vista.line_reasons import ReasonError, reason

ACCEPTED_FORMATS = {"JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF"}


class BadImage(ReasonError):
    """Not an image, an unsupported or lying format, or a decompression bomb."""


@dataclass(frozen=True)
class PreparedFigure:
    content: bytes
    extension: str
    width: int
    height: int
    sharpness: float | None


SHARPNESS_SIDE_PX = 512  # sharpness is measured at about this size, whatever the stored size


@contextmanager
def _reading(name: str) -> Iterator[None]:
    """Turns every failure to open or decode an image into BadImage."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    except BadImage:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise BadImage(reason("image_unusable", name=name, error=exc.__class__.__name__)) from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise BadImage(reason("image_damaged", name=name, error=str(exc))) from None


def _opened(content: bytes, *, name: str) -> Image.Image:
    """The image's header read (format, size, mode), nothing decoded yet."""
    with _reading(name):
        image: Image.Image = Image.open(io.BytesIO(content))
        if image.format not in ACCEPTED_FORMATS:
            raise BadImage(reason("image_format", name=name, format=image.format or "unknown"))
    return image


def _loaded(image: Image.Image, *, name: str, gray: bool = False, fit_side: int | None = None) -> Image.Image:
    """Decodes an opened image.

    For a colour JPEG, ``gray`` decodes its luma channel alone, which is what
    the sharpness measure reads (the same weights as ``convert("L")``), and
    skips the chroma upsampling and colour conversion: most of a decode's cost.
    ``fit_side`` shrinks a JPEG over that side to fit it while decoding (see
    _fit); either way the whole stream is still read, and so checked.
    """
    with _reading(name):
        if image.format == "JPEG" and image.mode in ("RGB", "L"):
            if gray:
                image.draft("L", None)
            elif fit_side and max(image.size) > fit_side:
                image = _fit(image, fit_side)  # decodes it
        image.load()
    return image


def _decoded(content: bytes, *, name: str, gray: bool = False, fit_side: int | None = None) -> Image.Image:
    """Opens and decodes an image (see _loaded), turning every failure into BadImage."""
    return _loaded(_opened(content, name=name), name=name, gray=gray, fit_side=fit_side)


def _fit(image: Image.Image, side: int) -> Image.Image:
    """The image shrunk (in place) to fit a side x side box, keeping its proportions.

    HAMMING (a windowed sinc as short as BILINEAR's triangle, widened by the
    shrink like every Pillow filter, so thin lines are averaged, not dropped)
    rather than BICUBIC: half the cost, and BICUBIC's resampling was most of a
    large figure's preparation (17 of 24 ms for a 1,100 px JPEG), while the
    result differs from it by a quarter of a grey level on average and the
    sharpness measured on it by a few percent (FIGURE_BLUR_THRESHOLD sorts
    sharp and blurred figures apart by far more; docs/benchmarks.md, row 1).
    With a reducing gap of 2, a much larger image is first reduced by a whole
    factor (for a JPEG, while decoding), then resampled from at least twice
    the final size, which keeps the result as good as resampling from the
    full image.
    """
    image.thumbnail((side, side), Image.Resampling.HAMMING, reducing_gap=2.0)
    return image


def open_image(content: bytes, *, name: str = "image") -> Image.Image:
    return _decoded(content, name=name)


def image_size(content: bytes) -> tuple[str | None, tuple[int, int]]:
    """Format and size from the header alone (no decoding)."""
    with Image.open(io.BytesIO(content)) as image:
        return image.format, image.size


def sharpness(image: Image.Image) -> float | None:
    """Variance of the Laplacian over ink pixels (and their neighbours), at
    SHARPNESS_SIDE_PX.

    Restricting to ink keeps a sharp diagram on a mostly white page from
    scoring as blurred; None when there is no ink at all. Measuring at one size
    makes the number comparable between large and small figures.
    """
    gray_image = image if image.mode == "L" else image.convert("L")
    factor = -(-max(gray_image.size) // SHARPNESS_SIDE_PX)  # ceil
    if factor > 1:
        gray_image = gray_image.reduce(factor)  # box average by a whole factor: cheap
    gray8 = np.asarray(gray_image)
    if gray8.shape[0] < 3 or gray8.shape[1] < 3:
        return None
    # Ink is whatever stands out from the paper; a fixed threshold would lose
    # the strokes of a blurred figure, which are exactly the ones to catch.
    # The paper's level is the median.
    ink = gray8 < _median_level(gray8) - 25
    # grow the ink mask by one pixel so the edges around strokes count
    near = ink.copy()
    near[1:, :] |= ink[:-1, :]
    near[:-1, :] |= ink[1:, :]
    near[:, 1:] |= ink[:, :-1]
    near[:, :-1] |= ink[:, 1:]
    mask = near[1:-1, 1:-1]
    if np.count_nonzero(mask) < 20:
        return None
    gray = gray8.astype(np.int16)  # int16 holds the Laplacian's range (-1020..1020) exactly
    lap = gray[:-2, 1:-1] + gray[2:, 1:-1]  # summed in place: fewer temporary arrays
    lap += gray[1:-1, :-2]
    lap += gray[1:-1, 2:]
    lap -= 4 * gray[1:-1, 1:-1]
    return float(lap[mask].astype(np.float32).var())


def _median_level(gray8: np.ndarray) -> int:
    """The lowest level that at least half the pixels (rounded down) are at or under.

    Found in eight counting passes over the pixels rather than from Pillow's
    histogram, which measured twice the cost (0.25 against 0.13 ms a figure).
    """
    half = gray8.size // 2
    low, high = 0, 255
    while low < high:
        middle = (low + high) // 2
        if np.count_nonzero(gray8 <= middle) >= half:
            high = middle
        else:
            low = middle + 1
    return low


# The side a PDF region is rendered at when figures keep their own size (FIGURE_STANDARD_SIDE_PX=0).
RENDER_SIDE_PX = 1024


def standard_side() -> int | None:
    """The longest side figures are stored at; None when each keeps its own (FIGURE_STANDARD_SIDE_PX=0)."""
    return settings.FIGURE_STANDARD_SIDE_PX or None


def prepare_figure(content: bytes, *, name: str = "figure") -> PreparedFigure:
    """Validates an image and stores it at the standard size (never enlarged).

    With FIGURE_STANDARD_SIDE_PX=0 a JPEG (grey or colour) or PNG keeps its bytes whatever its
    size, as the reference protocol sends the stored JPEG; it is still decoded whole (so checked)
    and measured. Other formats, and a JPEG in CMYK, are converted as always, at their own size.
    """
    side = standard_side()
    image = _opened(content, name=name)  # once: Pillow reads a JPEG's header in Python, 0.1 ms each time
    if image.format == "JPEG" and (side is None or max(image.size) <= side):
        # Already a standard JPEG: keep its bytes, so that a re-import or an
        # export round trip does not lose quality each time. Only its luma is
        # decoded, for the sharpness measure.
        image = _loaded(image, name=name, gray=True)
        if image.mode == "L":
            return PreparedFigure(content, "jpg", image.width, image.height, sharpness(image))
    elif image.format == "PNG" and side is None:
        image = _loaded(image, name=name)
        measured = image.convert("RGB") if image.mode not in ("RGB", "L") else image  # as a converted one is
        return PreparedFigure(content, "png", image.width, image.height, sharpness(measured))
    else:
        image = _loaded(image, name=name, fit_side=side)
    is_jpeg = image.format == "JPEG"
    image = image.convert("RGB") if image.mode not in ("RGB", "L") else image
    if side is not None and max(image.size) > side:
        image = _fit(image, side)
    buffer = io.BytesIO()
    if is_jpeg:
        image.save(buffer, "JPEG", quality=90)
    else:
        image.save(buffer, "PNG", compress_level=1)  # diagrams compress well even so; level 6 cost ~10 ms a figure
    return PreparedFigure(
        content=buffer.getvalue(),
        extension="jpg" if is_jpeg else "png",
        width=image.width,
        height=image.height,
        sharpness=sharpness(image),
    )
