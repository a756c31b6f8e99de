"""SVG charts from plain numbers, Python's standard library only (no matplotlib, no network):

    bar_chart(title, labels, series, ...)   horizontal bars, one group per label, one bar per series
    line_chart(title, series, ...)          one polyline per series, (x, y) points

Each returns the SVG document as a string; write(path, svg) saves it. Every bar is a <rect
class="bar"> whose width is value x (pixels per unit), and every point of a polyline is an affine
map of its (x, y): tests/tooling/svg_plot_test.py checks both, so a chart can be read as numbers.
"""
import math
from xml.sax.saxutils import escape, quoteattr

# kiln first, the peer second; further series cycle through the rest.
COLOURS = ["#d9480f", "#5c7cfa", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#495057"]
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'


def _text(x, y, s, size=12, anchor="start", extra=""):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" {FONT}{extra}>'
            f"{escape(str(s))}</text>")


def _number(v):
    return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3g}"


def nice_ticks(lo, hi, count=5):
    """Round tick values covering [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks = [first]
    while ticks[-1] < hi - 1e-9 * step:
        ticks.append(ticks[0] + len(ticks) * step)
    return ticks


def _legend(names, x, y):
    parts = []
    for i, name in enumerate(names):
        parts.append(f'<rect x="{x:.1f}" y="{y + 18 * i - 10:.1f}" width="12" height="12" '
                     f'fill="{COLOURS[i % len(COLOURS)]}"/>')
        parts.append(_text(x + 18, y + 18 * i, name))
    return parts


def bar_chart(title, labels, series, value_labels=None, axis_label="", width=760):
    """labels: one per group (row); series: [(name, [value per label])], values >= 0;
    value_labels: optional [[text per label] per series], printed after each bar (else the value)."""
    if any(len(values) != len(labels) for _, values in series):
        raise ValueError("every series needs one value per label")
    if any(v < 0 or not math.isfinite(v) for _, values in series for v in values):
        raise ValueError("bar values must be finite and >= 0")
    bar_h, gap, left, right, top = 16, 14, 230, 150, 64
    plot_w = width - left - right
    group_h = bar_h * len(series) + gap
    height = top + group_h * len(labels) + 48 + 18 * len(series)
    ticks = nice_ticks(0.0, max([v for _, values in series for v in values] + [1e-12]))
    scale = plot_w / ticks[-1]  # pixels per unit
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           _text(width / 2, 24, title, 15, "middle", ' font-weight="bold"')]
    axis_y = top + group_h * len(labels) - gap / 2
    for t in ticks:
        x = left + t * scale
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{axis_y:.1f}" stroke="#dee2e6"/>')
        out.append(_text(x, axis_y + 16, _number(t), 11, "middle"))
    if axis_label:
        out.append(_text(left + plot_w / 2, axis_y + 34, axis_label, 12, "middle"))
    for g, label in enumerate(labels):
        y0 = top + g * group_h
        out.append(_text(left - 8, y0 + bar_h * len(series) / 2 + 4, label, 12, "end"))
        for s, (name, values) in enumerate(series):
            v, y = values[g], y0 + s * bar_h
            text = value_labels[s][g] if value_labels else _number(v)
            out.append(f'<rect class="bar" data-series={quoteattr(name)} data-label={quoteattr(label)} '
                       f'data-value="{v!r}" x="{left}" y="{y:.1f}" width="{v * scale:.3f}" '
                       f'height="{bar_h - 2}" fill="{COLOURS[s % len(COLOURS)]}"/>')
            out.append(_text(left + v * scale + 4, y + bar_h - 4, text, 11))
    out.append(f'<line x1="{left}" y1="{top - 6}" x2="{left}" y2="{axis_y:.1f}" stroke="#495057"/>')
    out += _legend([name for name, _ in series], left, axis_y + 56 - (0 if axis_label else 18))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def line_chart(title, series, x_label="", y_label="", width=760, height=420):
    """series: [(name, [(x, y), ...])]; points that are not finite are left out."""
    clean = [(name, [(float(x), float(y)) for x, y in points if math.isfinite(x) and math.isfinite(y)])
             for name, points in series]
    xs = [x for _, pts in clean for x, _ in pts] or [0.0, 1.0]
    ys = [y for _, pts in clean for _, y in pts] or [0.0, 1.0]
    xt, yt = nice_ticks(min(xs), max(xs)), nice_ticks(min(ys), max(ys))
    left, right, top, bottom = 70, 30, 44, 60 + 18 * len(series)
    plot_w, plot_h = width - left - right, height - top - bottom
    sx, sy = plot_w / (xt[-1] - xt[0]), plot_h / (yt[-1] - yt[0])
    px = lambda x: left + (x - xt[0]) * sx
    py = lambda y: top + plot_h - (y - yt[0]) * sy
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           _text(width / 2, 24, title, 15, "middle", ' font-weight="bold"')]
    for t in xt:
        out.append(f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{top + plot_h}" stroke="#dee2e6"/>')
        out.append(_text(px(t), top + plot_h + 16, _number(t), 11, "middle"))
    for t in yt:
        out.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + plot_w}" y2="{py(t):.1f}" stroke="#dee2e6"/>')
        out.append(_text(left - 6, py(t) + 4, _number(t), 11, "end"))
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#495057"/>')
    if x_label:
        out.append(_text(left + plot_w / 2, top + plot_h + 36, x_label, 12, "middle"))
    if y_label:
        out.append(_text(16, top + plot_h / 2, y_label, 12, "middle",
                         f' transform="rotate(-90 16 {top + plot_h / 2:.1f})"'))
    for s, (name, pts) in enumerate(clean):
        points = " ".join(f"{px(x):.3f},{py(y):.3f}" for x, y in pts)
        out.append(f'<polyline class="series" data-series={quoteattr(name)} '
                   f'points="{points}" fill="none" stroke="{COLOURS[s % len(COLOURS)]}" stroke-width="1.8"/>')
    out += _legend([name for name, _ in clean], left, top + plot_h + 58)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write(path, svg):
    with open(path, "w", encoding="utf-8") as f:
        f.write(svg)
