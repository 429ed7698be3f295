"""Line charts (and stacked areas) as plain SVG for the bench reports: no plotting library is
needed on a fresh machine. Used by regulation_report.py and papers/*_report.py."""
import math
import os


def nice_step(raw):
    """The smallest 1, 2 or 5 × 10^k at or above raw (axis ticks people can read)."""
    if raw <= 0:
        return 1
    e = 10 ** math.floor(math.log10(raw))
    return next(m * e for m in (1, 2, 5, 10) if m * e >= raw - 1e-12)


def nice_axis(top):
    """A y axis from 0 to at least top in 3 to 6 readable steps: (its end, its step)."""
    step = nice_step(top / 5)
    return step * math.ceil(top / step - 1e-9), step


def frame(w, h, pads, title, xlabel, ylabel, ymax, ystep, Y):
    """The SVG's opening: background, title, both axes with their labels, and the y grid."""
    pad_l, pad_r, pad_t, pad_b = pads
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
         f'<line x1="{pad_l}" y1="{h - pad_b}" x2="{w - pad_r}" y2="{h - pad_b}" stroke="black"/>',
         f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{h - pad_b}" stroke="black"/>',
         f'<text x="{(pad_l + w - pad_r) / 2}" y="{h - 10}" text-anchor="middle">{xlabel}</text>',
         f'<text x="16" y="{h / 2}" text-anchor="middle" transform="rotate(-90 16 {h / 2})">{ylabel}</text>']
    for i in range(int(round(ymax / ystep)) + 1):
        v = ystep * i
        digits = 0 if ystep >= 1 else 1 if ystep >= 0.1 else 2
        s.append(f'<text x="{pad_l - 6}" y="{Y(v) + 4}" text-anchor="end">{v:,.{digits}f}</text>')
        s.append(f'<line x1="{pad_l}" y1="{Y(v)}" x2="{w - pad_r}" y2="{Y(v)}" stroke="#eee"/>')
    return s


def chart(out_dir, link_dir, name, title, xlabel, ylabel, series, logx=False, stacked=None, w=760, h=360, vlines=(), ymax=None):
    """series: [(label, color, [(x, y)], dashed)]; stacked: [(label, color, [(x, y)])] as areas."""
    longest = max([len(str(x[0])) for x in series] + [len(str(x[0])) for x in (stacked or [])] + [0])
    pad_l, pad_r, pad_t, pad_b = 70, max(160, 7 * longest + 36), 36, 46
    w = max(w, pad_l + pad_r + 480)
    pts = [p for s in series for p in s[2]] + [p for s in (stacked or []) for p in s[2]]
    if stacked:
        xs = sorted({p[0] for s in stacked for p in s[2]})
        tops = [sum(dict(s[2]).get(x, 0) for s in stacked) for x in xs]
        pts += list(zip(xs, tops))
    pts = [p for p in pts if not (math.isnan(p[1]) or math.isinf(p[1]))]
    if not pts:
        return ""
    fx = (lambda v: math.log10(max(v, 1e-9))) if logx else (lambda v: v)
    xmin, xmax = min(fx(p[0]) for p in pts), max(fx(p[0]) for p in pts)
    ymax, ystep = nice_axis(ymax or (max(p[1] for p in pts) * 1.08 or 1))
    if xmax == xmin:
        xmax = xmin + 1
    X = lambda v: pad_l + (fx(v) - xmin) / (xmax - xmin) * (w - pad_l - pad_r)
    Y = lambda v: h - pad_b - v / ymax * (h - pad_t - pad_b)
    s = frame(w, h, (pad_l, pad_r, pad_t, pad_b), title, xlabel, ylabel, ymax, ystep, Y)
    if logx:
        # Decades (and 2 and 5 between them when few decades are shown).
        lo, hi = math.floor(xmin), math.ceil(xmax)
        ticks = [m * 10 ** e for e in range(lo, hi + 1) for m in ((1, 2, 5) if hi - lo <= 3 else (1,)) if xmin <= fx(m * 10 ** e) <= xmax]
    else:
        ticks = sorted({p[0] for p in pts})
        if len(ticks) > 12:
            step = nice_step((max(ticks) - min(ticks)) / 10)
            first = math.ceil(min(ticks) / step) * step
            ticks = [first + i * step for i in range(int((max(ticks) - first) / step + 1e-9) + 1)]
    last = None
    for t in ticks:
        if last is not None and X(t) - last < 36:
            continue  # no overlapping labels
        last = X(t)
        s.append(f'<text x="{X(t)}" y="{h - pad_b + 16}" text-anchor="middle">{t:g}</text>')
    for v in vlines:
        s.append(f'<line x1="{X(v)}" y1="{pad_t}" x2="{X(v)}" y2="{h - pad_b}" stroke="#999" stroke-dasharray="3,3"/>')
    ly = pad_t
    if stacked:
        xs = sorted({p[0] for st in stacked for p in st[2]})
        base = {x: 0.0 for x in xs}
        for label, color, data in stacked:
            d = dict(data)
            top = {x: base[x] + d.get(x, 0) for x in xs}
            poly = " ".join(f"{X(x):.1f},{Y(top[x]):.1f}" for x in xs) + " " + " ".join(f"{X(x):.1f},{Y(base[x]):.1f}" for x in reversed(xs))
            s.append(f'<polygon points="{poly}" fill="{color}" fill-opacity="0.8" stroke="none"/>')
            s.append(f'<rect x="{w - pad_r + 10}" y="{ly}" width="12" height="10" fill="{color}"/><text x="{w - pad_r + 26}" y="{ly + 9}">{label}</text>')
            ly += 16
            base = top
    for label, color, data, dashed in series:
        data = [p for p in data if not (math.isnan(p[1]) or math.isinf(p[1]))]
        if not data:
            continue
        path = " ".join(f"{'M' if i == 0 else 'L'}{X(x):.1f},{Y(y):.1f}" for i, (x, y) in enumerate(data))
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        s.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        if len(data) < 20:
            s += [f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{color}"/>' for x, y in data]
        s.append(f'<line x1="{w - pad_r + 10}" y1="{ly + 5}" x2="{w - pad_r + 22}" y2="{ly + 5}" stroke="{color}" stroke-width="2"/><text x="{w - pad_r + 26}" y="{ly + 9}">{label}</text>')
        ly += 16
    s.append("</svg>\n")
    os.makedirs(out_dir, exist_ok=True)
    open(os.path.join(out_dir, name), "w").write("\n".join(s))
    return f"![{title}]({link_dir}/{name})"


def quantile(xs, q):
    """The q-quantile of xs (linear between order statistics), None when empty."""
    xs = sorted(xs)
    if not xs:
        return None
    i = q * (len(xs) - 1)
    lo = int(math.floor(i))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def boxplot(out_dir, link_dir, name, title, xlabel, ylabel, boxes, guides=(), w=760, h=360):
    """boxes: [(category label, [values])] drawn as box plots (box: quartiles; bar: median;
    whiskers: 5th and 95th percentiles; diamond: mean); guides: [(label, color, [y per box])]
    as lines across the boxes (e.g. a TCP-fair rate)."""
    stats = []
    for label, vals in boxes:
        q = [quantile(vals, x) for x in (0.05, 0.25, 0.5, 0.75, 0.95)]
        stats.append((label, q, sum(vals) / len(vals) if vals else None))
    tops = [q[4] for _, q, _ in stats if q[4] is not None] + [m for _, _, m in stats if m is not None]
    tops += [y for g in guides for y in g[2] if y is not None and not math.isinf(y)]
    if not tops:
        return ""
    longest = max([len(g[0]) for g in guides] + [len("mean (diamond)")])
    pad_l, pad_r, pad_t, pad_b = 70, max(160, 7 * longest + 36), 36, 46
    w = max(w, pad_l + pad_r + 480)
    ymax, ystep = nice_axis(max(tops) * 1.08 or 1)
    n = len(stats)
    slot = (w - pad_l - pad_r) / max(n, 1)
    X = lambda i: pad_l + slot * (i + 0.5)
    Y = lambda v: h - pad_b - min(v, ymax) / ymax * (h - pad_t - pad_b)
    s = frame(w, h, (pad_l, pad_r, pad_t, pad_b), title, xlabel, ylabel, ymax, ystep, Y)
    bw = min(40, slot * 0.5)
    for i, (label, q, mean) in enumerate(stats):
        x = X(i)
        s.append(f'<text x="{x:.1f}" y="{h - pad_b + 16}" text-anchor="middle">{label}</text>')
        if q[0] is None:
            continue
        s.append(f'<line x1="{x:.1f}" y1="{Y(q[0]):.1f}" x2="{x:.1f}" y2="{Y(q[4]):.1f}" stroke="#1f77b4"/>')
        for v in (q[0], q[4]):
            s.append(f'<line x1="{x - bw / 4:.1f}" y1="{Y(v):.1f}" x2="{x + bw / 4:.1f}" y2="{Y(v):.1f}" stroke="#1f77b4"/>')
        s.append(f'<rect x="{x - bw / 2:.1f}" y="{Y(q[3]):.1f}" width="{bw:.1f}" height="{max(Y(q[1]) - Y(q[3]), 1):.1f}" fill="#aec7e8" stroke="#1f77b4"/>')
        s.append(f'<line x1="{x - bw / 2:.1f}" y1="{Y(q[2]):.1f}" x2="{x + bw / 2:.1f}" y2="{Y(q[2]):.1f}" stroke="#08306b" stroke-width="2"/>')
        if mean is not None:
            m = Y(mean)
            s.append(f'<polygon points="{x:.1f},{m - 5:.1f} {x + 5:.1f},{m:.1f} {x:.1f},{m + 5:.1f} {x - 5:.1f},{m:.1f}" fill="#d62728"/>')
    ly = pad_t
    s.append(f'<rect x="{w - pad_r + 10}" y="{ly}" width="12" height="10" fill="#aec7e8" stroke="#1f77b4"/><text x="{w - pad_r + 26}" y="{ly + 9}">quartiles, median</text>')
    ly += 16
    s.append(f'<line x1="{w - pad_r + 16}" y1="{ly}" x2="{w - pad_r + 16}" y2="{ly + 10}" stroke="#1f77b4"/><text x="{w - pad_r + 26}" y="{ly + 9}">5th–95th percentile</text>')
    ly += 16
    s.append(f'<polygon points="{w - pad_r + 16},{ly} {w - pad_r + 21},{ly + 5} {w - pad_r + 16},{ly + 10} {w - pad_r + 11},{ly + 5}" fill="#d62728"/><text x="{w - pad_r + 26}" y="{ly + 9}">mean (diamond)</text>')
    ly += 16
    for label, color, ys in guides:
        pts = [(X(i), Y(y)) for i, y in enumerate(ys) if y is not None and not math.isinf(y)]
        if pts:
            s.append('<path d="' + " ".join(f"{'M' if j == 0 else 'L'}{x:.1f},{y:.1f}" for j, (x, y) in enumerate(pts)) + f'" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="6,4"/>')
        s.append(f'<line x1="{w - pad_r + 10}" y1="{ly + 5}" x2="{w - pad_r + 22}" y2="{ly + 5}" stroke="{color}" stroke-width="2" stroke-dasharray="4,2"/><text x="{w - pad_r + 26}" y="{ly + 9}">{label}</text>')
        ly += 16
    s.append("</svg>\n")
    os.makedirs(out_dir, exist_ok=True)
    open(os.path.join(out_dir, name), "w").write("\n".join(s))
    return f"![{title}]({link_dir}/{name})"
