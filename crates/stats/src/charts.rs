//! Charts as SVG, drawn with `plotters` (pure Rust, no font or system library: text is laid out
//! by the browser, sizes are estimated): axes with nice-number ticks along their whole length,
//! labelled units, a legend with line swatches in its own column right of the data (never over
//! it), and a logarithmic x axis where values span decades (inter-arrival times). The SVG has a
//! `viewBox`, so the report scales it to the page's width.

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Line colours (colour-blind-safe Tableau 10 order; blue first, red second).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// One series: its legend name and `(x, y)` points.
pub type Series = (String, Vec<(f64, f64)>);

/// What to draw.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// Logarithmic x axis (points with x ≤ 0 are left out).
    pub x_log: bool,
    /// Fixed y range (CDFs: 0..1); else from the data, starting at 0.
    pub y_range: Option<(f64, f64)>,
    pub width: u32,
    pub height: u32,
    /// The first this many series are stacked: each is drawn as a filled band on top of the
    /// ones before it (they must share their x values); the rest are lines over them.
    pub stacked: usize,
    /// Events marked on the x axis: a dashed vertical line and a label at each (a link taken
    /// down, a command), drawn where they fall inside the data's range.
    pub marks: &'a [(f64, String)],
}

impl<'a> Chart<'a> {
    /// A chart of the usual size, linear axes.
    pub fn new(title: &'a str, x_label: &'a str, y_label: &'a str, series: &'a [Series]) -> Chart<'a> {
        Chart { title, x_label, y_label, series, x_log: false, y_range: None, width: 900, height: 320, stacked: 0, marks: &[] }
    }

    /// Marks these events on the x axis (see [`Chart::marks`]).
    pub fn marks(mut self, marks: &'a [(f64, String)]) -> Self {
        self.marks = marks;
        self
    }

    /// Stacks the first `n` series (see [`Chart::stacked`]).
    pub fn stack(mut self, n: usize) -> Self {
        self.stacked = n.min(self.series.len());
        self
    }

    /// The series as drawn: stacked ones cumulated.
    fn drawn(&self) -> Vec<Series> {
        let mut out: Vec<Series> = Vec::with_capacity(self.series.len());
        for (i, (name, pts)) in self.series.iter().enumerate() {
            if i > 0 && i < self.stacked {
                let below = &out[i - 1].1;
                let pts = pts.iter().enumerate().map(|(j, &(x, y))| (x, y + below.get(j).map_or(0.0, |b| b.1))).collect();
                out.push((name.clone(), pts));
            } else {
                out.push((name.clone(), pts.clone()));
            }
        }
        out
    }

    pub fn cdf(mut self) -> Self {
        self.y_range = Some((0.0, 1.0));
        self
    }

    pub fn log_x(mut self, on: bool) -> Self {
        self.x_log = on;
        self
    }

    pub fn size(mut self, w: u32, h: u32) -> Self {
        self.width = w;
        self.height = h;
        self
    }

    /// The SVG text. A chart without any finite point is drawn with empty axes and says so.
    pub fn svg(&self) -> String {
        let mut buf = String::new();
        // Drawing into a string cannot fail for I/O; a plotting error leaves a partial chart,
        // which the page's own check then reports.
        let _ = self.draw(&mut buf);
        // Data lines (stroke width 2) are marked, so a page can check that each chart drew its
        // data and not just its axes; the title makes the SVG accessible.
        let buf = buf.replace("stroke-width=\"2\" points=", "class=\"series\" stroke-width=\"2\" points=");
        let title = crate::table::esc(self.title);
        buf.replacen(" xmlns=", &format!(" role=\"img\" aria-label=\"{title}\" xmlns="), 1).replacen('>', &format!("><title>{title}</title>"), 1)
    }

    fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let drawn = self.drawn();
        let pts = || drawn.iter().flat_map(|s| s.1.iter()).filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.x_log || *x > 0.0));
        let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut y1 = f64::NEG_INFINITY;
        let mut y0 = 0.0f64;
        for (x, y) in pts() {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
            y1 = y1.max(*y);
            y0 = y0.min(*y);
        }
        if !x0.is_finite() {
            (x0, x1) = if self.x_log { (0.1, 10.0) } else { (0.0, 1.0) };
        }
        if x1 <= x0 {
            x1 = if self.x_log { x0 * 10.0 } else { x0 + 1.0 };
        }
        if !y1.is_finite() || y1 <= y0 {
            y1 = y0 + 1.0;
        }
        let y = self.y_range.unwrap_or((y0, y1 * 1.05));
        ((x0, x1), y)
    }

    fn draw(&self, buf: &mut String) -> Result<(), String> {
        let legend_w = if self.series.len() > 1 || self.series.first().is_some_and(|s| !s.0.is_empty()) {
            let longest = self.series.iter().map(|s| s.0.chars().count()).max().unwrap_or(0) as u32;
            (longest * 7 + 44).clamp(90, 260)
        } else {
            0
        };
        let root = SVGBackend::with_string(buf, (self.width, self.height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (plot, legend) = root.split_horizontally(self.width - legend_w);
        let ((x0, x1), (y0, y1)) = self.ranges();
        let mut builder = ChartBuilder::on(&plot);
        builder.caption(self.title, ("sans-serif", 20)).margin(8).margin_right(16).x_label_area_size(42).y_label_area_size(64);
        if self.x_log {
            let mut chart = builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1).map_err(|e| e.to_string())?;
            self.finish(&mut chart)?;
        } else {
            let mut chart = builder.build_cartesian_2d(x0..x1, y0..y1).map_err(|e| e.to_string())?;
            self.finish(&mut chart)?;
        }
        // The legend, in its own column: a swatch of each line and its name.
        for (i, (name, _)) in self.series.iter().enumerate().filter(|(_, s)| !s.0.is_empty()) {
            let c = PALETTE[i % PALETTE.len()];
            let y = 40 + 20 * i as i32;
            legend.draw(&PathElement::new(vec![(4, y), (28, y)], c.stroke_width(3))).map_err(|e| e.to_string())?;
            legend.draw(&Text::new(name.clone(), (34, y - 7), ("sans-serif", 16).into_font())).map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
        Ok(())
    }

    fn finish<'b, X>(&self, chart: &mut ChartContext<'b, SVGBackend<'b>, Cartesian2d<X, RangedCoordf64>>) -> Result<(), String>
    where
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        chart
            .configure_mesh()
            .x_desc(self.x_label)
            .y_desc(self.y_label)
            .x_labels(10)
            .y_labels(6)
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| e.to_string())?;
        let drawn = self.drawn();
        for (i, (_, pts)) in drawn.iter().enumerate() {
            let c = PALETTE[i % PALETTE.len()];
            let keep = |(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!self.x_log || *x > 0.0);
            let pts: Vec<(f64, f64)> = pts.iter().copied().filter(keep).collect();
            if i < self.stacked && pts.len() > 1 {
                // The band between this series and the one below (or the axis).
                let below: Vec<(f64, f64)> =
                    if i == 0 { pts.iter().map(|p| (p.0, 0.0)).collect() } else { drawn[i - 1].1.iter().copied().filter(keep).collect() };
                let mut poly = pts.clone();
                poly.extend(below.iter().rev());
                chart.draw_series(std::iter::once(Polygon::new(poly, c.mix(0.55).filled()))).map_err(|e| e.to_string())?;
            }
            if pts.len() == 1 {
                // A single point is drawn as a short mark so the series is visible.
                let (x, y) = pts[0];
                chart.draw_series(LineSeries::new([(x, y), (x, y)], c.stroke_width(6))).map_err(|e| e.to_string())?;
            } else {
                chart.draw_series(LineSeries::new(pts, c.stroke_width(2))).map_err(|e| e.to_string())?;
            }
        }
        let ((x0, x1), (y0, y1)) = self.ranges();
        let grey = RGBColor(0x66, 0x66, 0x66);
        for (k, (x, label)) in self.marks.iter().enumerate().filter(|(_, m)| m.0.is_finite() && m.0 >= x0 && m.0 <= x1) {
            // dashed: short segments up the chart
            let steps = 24;
            let seg = |j: i32| y0 + (y1 - y0) * j as f64 / steps as f64;
            let dashes = (0..steps).step_by(2).map(|j| PathElement::new(vec![(*x, seg(j)), (*x, seg(j + 1))], grey.stroke_width(1)));
            chart.draw_series(dashes).map_err(|e| e.to_string())?;
            // labels staggered so that close events stay readable
            let at = y1 - (y1 - y0) * (0.06 + 0.08 * (k % 3) as f64);
            chart
                .draw_series(std::iter::once(Text::new(format!(" {label}"), (*x, at), ("sans-serif", 13).into_font().color(&grey))))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// A tick label with no more digits than it needs: 0.25, 40, 1.5k, 2M.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if a >= 1e6 {
        trim(format!("{:.2}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.1}", v / 1e3)) + "k"
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.4}"))
    }
}

/// Whether values spanning `lo..hi` (positive) cover more than two decades.
pub fn spans_decades(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi / lo > 100.0
}

/// Points of an empirical CDF as a staircase (a vertical step at each value).
pub fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2 + 1);
    let mut prev = 0.0;
    for (x, y) in points {
        out.push((*x, prev));
        out.push((*x, *y));
        prev = *y;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(40.0), "40");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(15_000.0), "15k");
        assert_eq!(tick(2_000_000.0), "2M");
    }

    #[test]
    fn a_chart_has_its_lines_axes_and_a_legend_outside_the_data() {
        let s = vec![("measured".to_string(), vec![(0.0, 0.0), (1.0, 0.5), (2.0, 1.0)]), ("model".to_string(), vec![(0.0, 0.0), (2.0, 1.0)])];
        let svg = Chart::new("t <&>", "time (s)", "CDF", &s).cdf().svg();
        assert!(svg.contains("viewBox"), "scalable");
        assert_eq!(svg.matches("class=\"series\"").count(), 2, "two data lines");
        assert!(svg.contains("<title>t &lt;&amp;&gt;</title>"));
        assert!(svg.contains("measured") && svg.contains("time (s)"));
        assert!(svg.contains("t &lt;&amp;&gt;"), "text escaped");
        // Log axis with a zero in the data: the zero is left out, nothing panics.
        let s = vec![("iat".to_string(), vec![(0.0, 0.1), (0.5, 0.5), (500.0, 1.0)])];
        let svg = Chart::new("iat", "ms", "CDF", &s).cdf().log_x(true).svg();
        assert!(svg.contains("<polyline"));
        // No data at all: empty axes, no panic.
        let svg = Chart::new("none", "s", "x", &[]).svg();
        assert!(svg.contains("<svg"));
    }
}
