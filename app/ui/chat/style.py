"""Colours, fonts and metrics of the conversation, derived from the widget's palette.

Everything is computed from `QPalette` (so the app theme, light or dark, drives it) and
then nudged until it meets a minimum contrast against the surface it is drawn on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from PySide6.QtGui import QColor, QFont, QFontDatabase, QFontMetricsF, QPalette

# ---- colour arithmetic -------------------------------------------------------------------


def luminance(color: QColor) -> float:
    """WCAG relative luminance."""

    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(color.redF())
        + 0.7152 * channel(color.greenF())
        + 0.0722 * channel(color.blueF())
    )


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio (1 … 21)."""
    la, lb = luminance(a), luminance(b)
    hi, lo = max(la, lb), min(la, lb)
    return (hi + 0.05) / (lo + 0.05)


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """`a` moved a fraction `t` towards `b`."""
    return QColor.fromRgbF(
        a.redF() + (b.redF() - a.redF()) * t,
        a.greenF() + (b.greenF() - a.greenF()) * t,
        a.blueF() + (b.blueF() - a.blueF()) * t,
        1.0,
    )


def ensure_contrast(color: QColor, background: QColor, minimum: float) -> QColor:
    """`color`, lightened or darkened (keeping its hue) until it reads on `background`."""
    target = QColor("white") if luminance(background) < 0.4 else QColor("black")
    result = QColor(color)
    step = 0
    while contrast(result, background) < minimum and step < 20:
        step += 1
        result = mix(color, target, step / 20)
    return result


def with_alpha(color: QColor, alpha: float) -> QColor:
    result = QColor(color)
    result.setAlphaF(alpha)
    return result


# ---- the theme ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ChatTheme:
    dark: bool
    background: QColor
    text: QColor
    muted: QColor
    link: QColor
    accent: QColor
    bubble: QColor
    bubble_text: QColor
    card: QColor
    card_border: QColor
    code_bg: QColor
    code_header: QColor
    code_border: QColor
    inline_code_bg: QColor
    badge_bg: QColor
    ok: QColor
    error: QColor
    warn: QColor
    diff_add: QColor
    diff_add_bg: QColor
    diff_del: QColor
    diff_del_bg: QColor
    #: Selected text: the palette's highlight colours.
    highlight: QColor
    highlighted_text: QColor
    font: QFont
    small_font: QFont
    bold_font: QFont
    mono_font: QFont
    #: Identifies the theme in layout caches; a new theme means new documents.
    key: tuple[object, ...] = field(default=())
    line_height: float = 18.0
    char_width: float = 7.0
    mono_char_width: float = 7.5

    @property
    def pygments_style(self) -> str:
        return "github-dark" if self.dark else "default"


def _body_font(base: QFont, points: float = 0) -> QFont:
    """The size the user chose (`points` > 0), else a comfortable reading size: at least
    10.5 pt, a little above the UI font."""
    font = QFont(base)
    size = base.pointSizeF()
    if points > 0:
        font.setPointSizeF(points)
    elif size > 0:
        font.setPointSizeF(max(10.5, size * 1.1))
    return font


def theme_from_palette(palette: QPalette, base_font: QFont, text_points: float = 0) -> ChatTheme:
    bg = palette.color(QPalette.ColorRole.Base)
    dark = luminance(bg) < 0.25
    text = ensure_contrast(palette.color(QPalette.ColorRole.Text), bg, 7.0)
    white, black = QColor("white"), QColor("black")
    accent = palette.color(QPalette.ColorRole.Highlight)
    link = ensure_contrast(palette.color(QPalette.ColorRole.Link), bg, 4.5)
    if dark:
        ok, error, warn = QColor("#5fd38d"), QColor("#ff7b72"), QColor("#f0b54a")
        diff_add, diff_del = QColor("#7ee2a8"), QColor("#ffa198")
        diff_add_bg, diff_del_bg = QColor(46, 160, 67, 50), QColor(248, 81, 73, 50)
    else:
        ok, error, warn = QColor("#1e7f45"), QColor("#c4322b"), QColor("#a15c00")
        diff_add, diff_del = QColor("#116329"), QColor("#a40e26")
        diff_add_bg, diff_del_bg = QColor(46, 160, 67, 38), QColor(248, 81, 73, 38)
    lift = white if dark else black
    card = mix(bg, lift, 0.035 if dark else 0.018)
    code_bg = mix(bg, lift, 0.06 if dark else 0.035)
    bubble = mix(bg, lift, 0.10 if dark else 0.055)
    font = _body_font(base_font, text_points)
    small = QFont(font)
    small.setPointSizeF(max(8.5, font.pointSizeF() * 0.87))
    bold = QFont(font)
    bold.setWeight(QFont.Weight.DemiBold)
    mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    mono.setPointSizeF(max(9.0, font.pointSizeF() * 0.92))
    metrics, mono_metrics = QFontMetricsF(font), QFontMetricsF(mono)
    highlight = palette.color(QPalette.ColorRole.Highlight)
    highlighted_text = ensure_contrast(
        palette.color(QPalette.ColorRole.HighlightedText), highlight, 4.5
    )
    colors = (bg, text, accent, link, palette.color(QPalette.ColorRole.Window), highlighted_text)
    return ChatTheme(
        dark=dark,
        background=bg,
        text=text,
        muted=ensure_contrast(mix(text, bg, 0.42), bg, 4.5),
        link=link,
        accent=ensure_contrast(accent, bg, 3.0),
        bubble=bubble,
        bubble_text=ensure_contrast(text, bubble, 7.0),
        card=card,
        card_border=mix(bg, lift, 0.14 if dark else 0.12),
        code_bg=code_bg,
        code_header=mix(bg, lift, 0.09 if dark else 0.06),
        code_border=mix(bg, lift, 0.13 if dark else 0.10),
        inline_code_bg=mix(bg, lift, 0.10 if dark else 0.07),
        badge_bg=mix(bg, lift, 0.12 if dark else 0.07),
        ok=ensure_contrast(ok, card, 4.5),
        error=ensure_contrast(error, card, 4.5),
        warn=ensure_contrast(warn, card, 4.5),
        diff_add=ensure_contrast(diff_add, code_bg, 4.5),
        diff_add_bg=diff_add_bg,
        diff_del=ensure_contrast(diff_del, code_bg, 4.5),
        diff_del_bg=diff_del_bg,
        highlight=highlight,
        highlighted_text=highlighted_text,
        font=font,
        small_font=small,
        bold_font=bold,
        mono_font=mono,
        key=(*(c.rgba() for c in colors), font.toString(), mono.toString()),
        line_height=metrics.lineSpacing(),
        char_width=metrics.averageCharWidth(),
        mono_char_width=mono_metrics.horizontalAdvance("m"),
    )


@lru_cache(maxsize=8)
def token_colors(style_name: str, background_rgb: int) -> dict[object, tuple[str, bool, bool]]:
    """Pygments token type → (colour, bold, italic), each colour readable on the background."""
    from pygments.styles import get_style_by_name

    style = get_style_by_name(style_name)
    background = QColor.fromRgb(background_rgb)
    result: dict[object, tuple[str, bool, bool]] = {}
    for token, spec in style:
        if not spec["color"]:
            continue
        color = ensure_contrast(QColor("#" + spec["color"]), background, 4.0)
        result[token] = (color.name(), bool(spec["bold"]), bool(spec["italic"]))
    return result
