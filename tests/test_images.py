"""Figure preparation: standard size, kept bytes, and a sharpness measure that the cheap paths keep."""

import io

import numpy as np
import pytest
from django.conf import settings
from PIL import Image, ImageDraw, ImageFilter

from annotation import images
from annotation.images import BadImage


def diagram(size, *, blur=0.0):
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    width, height = size
    for i in range(1, 8):
        draw.line((i * width // 8, 10, i * width // 8, height - 10), fill=(0, 0, 120), width=2)
        draw.line((10, i * height // 8, width - 10, i * height // 8), fill=(120, 0, 0), width=2)
    draw.ellipse((width // 4, height // 4, 3 * width // 4, 3 * height // 4), outline="black", width=3)
    return image.filter(ImageFilter.GaussianBlur(blur)) if blur else image


def encoded(image, fmt="JPEG"):
    buffer = io.BytesIO()
    image.save(buffer, fmt, quality=85) if fmt == "JPEG" else image.save(buffer, fmt)
    return buffer.getvalue()


def full_decode_sharpness(content):
    """The measure as it was taken before the luma-only decode: on a full RGB decode."""
    image = Image.open(io.BytesIO(content))
    image.load()
    return images.sharpness(image)


@pytest.mark.parametrize("size", [(300, 200), (620, 450), (1000, 700)])
def test_a_standard_jpeg_keeps_its_bytes_and_its_sharpness_reads_as_a_full_decode(size):
    content = encoded(diagram(size))
    prepared = images.prepare_figure(content)
    assert prepared.content == content
    assert (prepared.extension, prepared.width, prepared.height) == ("jpg", *size)
    # Luma straight from the JPEG skips the clipping of the RGB reconstruction
    # (strongest on saturated colours like these lines): a few percent, never a
    # factor, against a threshold that sharp and blurred figures pass by 10x.
    assert prepared.sharpness == pytest.approx(full_decode_sharpness(content), rel=0.1)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_blurred_and_sharp_figures_fall_either_side_of_the_threshold(fmt):
    threshold = settings.FIGURE_BLUR_THRESHOLD
    for size in [(620, 450), (1200, 900), (2600, 1800)]:  # kept, resized, reduced while decoding
        sharp = images.prepare_figure(encoded(diagram(size), fmt))
        blurred = images.prepare_figure(encoded(diagram(size, blur=4 * size[0] / 620), fmt))
        assert sharp.sharpness > 10 * threshold, size
        assert blurred.sharpness < threshold, size


@pytest.mark.parametrize(("size", "stored"), [((1200, 900), (1024, 768)), ((2600, 1800), (1024, 709))])
def test_a_large_figure_is_stored_at_the_standard_side(size, stored):
    for fmt, extension in (("JPEG", "jpg"), ("PNG", "png")):
        prepared = images.prepare_figure(encoded(diagram(size), fmt))
        assert (prepared.extension, prepared.width, prepared.height) == (extension, *stored)
        with Image.open(io.BytesIO(prepared.content)) as image:
            assert image.size == stored


def test_a_cmyk_jpeg_is_converted_and_measured():
    content = encoded(diagram((400, 300)).convert("CMYK"))
    prepared = images.prepare_figure(content)
    assert prepared.content != content
    assert Image.open(io.BytesIO(prepared.content)).mode == "RGB"
    assert prepared.sharpness > settings.FIGURE_BLUR_THRESHOLD


@pytest.mark.parametrize("size", [(620, 450), (1200, 900)])
def test_a_truncated_jpeg_is_refused_on_every_path(size, english):
    content = encoded(diagram(size))
    with pytest.raises(BadImage, match="damaged"):
        images.prepare_figure(content[: len(content) // 2])


@pytest.mark.parametrize("blur", [0, 1.5, 2])
def test_a_resized_figure_measures_as_it_did_when_resized_with_bicubic(blur):
    """HAMMING replaced BICUBIC for the shrink (half the cost); the measure moves by a few percent."""
    content = encoded(diagram((1150, 820), blur=blur * 1150 / 620))
    prepared = images.prepare_figure(content)
    bicubic = Image.open(io.BytesIO(content))
    bicubic.thumbnail((1024, 1024), Image.Resampling.BICUBIC, reducing_gap=2.0)
    assert (prepared.width, prepared.height) == bicubic.size
    assert prepared.sharpness == pytest.approx(images.sharpness(bicubic), rel=0.1)


@pytest.mark.parametrize("seed", range(5))
def test_the_paper_level_is_the_median_a_histogram_gives(seed):
    rng = np.random.default_rng(seed)
    gray8 = np.where(rng.random((37, 53)) < 0.8, 250 - seed, rng.integers(0, 256, (37, 53))).astype(np.uint8)
    counts = np.cumsum(np.bincount(gray8.ravel(), minlength=256))
    assert images._median_level(gray8) == int(np.searchsorted(counts, counts[-1] // 2))
    assert images._median_level(np.full((3, 3), 7, np.uint8)) == 7


def test_with_side_0_jpeg_and_png_keep_their_bytes_at_any_size_and_are_still_checked(settings, english):
    """FIGURE_STANDARD_SIDE_PX=0 (the reference's figures as they are): stored byte for byte,
    measured as a full decode, and a damaged file is still refused."""
    settings.FIGURE_STANDARD_SIDE_PX = 0
    for fmt, extension in (("JPEG", "jpg"), ("PNG", "png")):
        content = encoded(diagram((2600, 1800)), fmt)
        prepared = images.prepare_figure(content)
        assert (prepared.content, prepared.extension, prepared.width, prepared.height) == (
            content, extension, 2600, 1800)  # fmt: skip
        assert prepared.sharpness == pytest.approx(full_decode_sharpness(content), rel=0.1)
        with pytest.raises(BadImage, match="damaged"):
            images.prepare_figure(content[: len(content) // 2])
    converted = images.prepare_figure(encoded(diagram((1500, 1000)), "BMP"))  # other formats: PNG, full size
    assert (converted.extension, converted.width, converted.height) == ("png", 1500, 1000)
