//! Minimal SVG line plots: axes with ticks, one polyline per series, a legend. Enough to show
//! how per-operation cost moves with size, without pulling in a plotting stack.

use std::fmt::Write;

use super::model::{Plot, Series};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#17becf", "#bcbd22",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders `plot` as a standalone SVG document.
pub fn render(plot: &Plot) -> String {
    let frame = Frame::new(plot);
    let series: Vec<&Series> = plot
        .series
        .iter()
        .filter(|s| s.points.iter().any(|p| frame.usable(p)))
        .collect();
    let points: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|p| frame.usable(p))
        .collect();
    let frame = frame.fitted(&points);
    let mut svg = String::new();
    frame.header(&mut svg);
    frame.x_ticks(&mut svg, &points);
    frame.y_ticks(&mut svg);
    frame.axis_labels(&mut svg);
    for (index, series) in series.iter().enumerate() {
        frame.series(&mut svg, index, series);
    }
    svg.push_str("</svg>\n");
    svg
}

/// The plot's scales: the data's bounds (after the logarithm on a log axis) and the drawing
/// area they map onto.
struct Frame<'p> {
    plot: &'p Plot,
    x_min: f64,
    x_max: f64,
    y_min: f64,
    y_max: f64,
}

const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;

impl<'p> Frame<'p> {
    fn new(plot: &'p Plot) -> Frame<'p> {
        Frame {
            plot,
            x_min: 0.0,
            x_max: 1.0,
            y_min: 0.0,
            y_max: 1.0,
        }
    }

    /// Whether a point can be drawn: finite, and positive on a log axis.
    fn usable(&self, &(x, y): &(f64, f64)) -> bool {
        x.is_finite()
            && y.is_finite()
            && (!self.plot.log_y || y > 0.0)
            && (!self.plot.log_x || x > 0.0)
    }

    fn fx(&self, x: f64) -> f64 {
        if self.plot.log_x {
            x.log10()
        } else {
            x
        }
    }

    fn fy(&self, y: f64) -> f64 {
        if self.plot.log_y {
            y.log10()
        } else {
            y
        }
    }

    /// The frame fitted to `points`: a linear y axis starts at 0, empty ranges widen, and the
    /// top (and a log axis's bottom) gets 5% of room.
    fn fitted(self, points: &[(f64, f64)]) -> Frame<'p> {
        let (mut x_min, mut x_max) = bounds(points.iter().map(|p| self.fx(p.0)));
        let (mut y_min, mut y_max) = bounds(points.iter().map(|p| self.fy(p.1)));
        if !self.plot.log_y {
            y_min = y_min.min(0.0);
        }
        if x_max <= x_min {
            x_max = x_min + 1.0;
            x_min -= 1.0;
        }
        if y_max <= y_min {
            y_max = y_min + 1.0;
        }
        let y_pad = (y_max - y_min) * 0.05;
        y_max += y_pad;
        if self.plot.log_y {
            y_min -= y_pad;
        }
        Frame {
            x_min,
            x_max,
            y_min,
            y_max,
            ..self
        }
    }

    fn sx(&self, x: f64) -> f64 {
        LEFT + (self.fx(x) - self.x_min) / (self.x_max - self.x_min) * PLOT_W
    }

    /// The drawing's y of `fy`, a value already on the axis's scale.
    fn sy_scaled(&self, fy: f64) -> f64 {
        TOP + PLOT_H - (fy - self.y_min) / (self.y_max - self.y_min) * PLOT_H
    }

    fn sy(&self, y: f64) -> f64 {
        self.sy_scaled(self.fy(y))
    }

    /// The document's start, background, title and axes.
    fn header(&self, svg: &mut String) {
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + PLOT_W / 2.0,
            escape(&self.plot.title)
        );
        let _ = writeln!(
            svg,
            r#"<path d="M{LEFT},{TOP} V{} H{}" stroke="black" fill="none"/>"#,
            TOP + PLOT_H,
            LEFT + PLOT_W
        );
    }

    /// Ticks on the x axis: at the measured x values when there are few, else evenly spaced.
    fn x_ticks(&self, svg: &mut String, points: &[(f64, f64)]) {
        let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let x_ticks: Vec<f64> = if !xs.is_empty() && xs.len() <= 8 {
            xs
        } else {
            (0..=5)
                .map(|i| {
                    let t = self.x_min + (self.x_max - self.x_min) * f64::from(i) / 5.0;
                    if self.plot.log_x {
                        10f64.powf(t)
                    } else {
                        t
                    }
                })
                .collect()
        };
        for &x in &x_ticks {
            let px = self.sx(x);
            let _ = writeln!(
                svg,
                r##"<line x1="{px}" y1="{}" x2="{px}" y2="{}" stroke="#ccc"/><text x="{px}" y="{}" text-anchor="middle">{}</text>"##,
                TOP,
                TOP + PLOT_H,
                TOP + PLOT_H + 16.0,
                tick(x)
            );
        }
    }

    /// Six evenly spaced ticks on the y axis.
    fn y_ticks(&self, svg: &mut String) {
        for i in 0..=5 {
            let fy = self.y_min + (self.y_max - self.y_min) * f64::from(i) / 5.0;
            let value = if self.plot.log_y { 10f64.powf(fy) } else { fy };
            let py = self.sy_scaled(fy);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{py}" x2="{}" y2="{py}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                LEFT + PLOT_W,
                LEFT - 6.0,
                py + 4.0,
                tick(value)
            );
        }
    }

    fn axis_labels(&self, svg: &mut String) {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            LEFT + PLOT_W / 2.0,
            HEIGHT - 18.0,
            escape(&self.plot.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">{}</text>"#,
            TOP + PLOT_H / 2.0,
            TOP + PLOT_H / 2.0,
            escape(&self.plot.y_label)
        );
    }

    /// Series number `index`: its line, its points and its legend entry.
    fn series(&self, svg: &mut String, index: usize, series: &Series) {
        let color = COLORS[index % COLORS.len()];
        let path: Vec<String> = series
            .points
            .iter()
            .filter(|p| self.usable(p))
            .map(|&(x, y)| format!("{:.1},{:.1}", self.sx(x), self.sy(y)))
            .collect();
        if !path.is_empty() {
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                path.join(" ")
            );
            for point in &path {
                let (x, y) = point.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(svg, r#"<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>"#);
            }
        }
        let ly = TOP + 10.0 + index as f64 * 18.0;
        let lx = LEFT + PLOT_W + 15.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            escape(&series.name)
        );
    }
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

fn tick(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if magnitude >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if magnitude >= 100.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else if magnitude >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_and_escapes_text() {
        let plot = Plot {
            file: "p.svg".into(),
            title: "a < b".into(),
            x_label: "n".into(),
            y_label: "ns".into(),
            log_x: false,
            log_y: false,
            series: vec![Series {
                name: "s&p".into(),
                points: vec![(1.0, 2.0), (2.0, 3.0)],
            }],
        };
        let svg = render(&plot);
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("a &lt; b") && svg.contains("s&amp;p"));
        assert_eq!(svg.matches("<polyline").count(), 1);
    }

    #[test]
    fn empty_and_log_plots_do_not_panic() {
        let mut plot = Plot {
            file: "p.svg".into(),
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            log_y: true,
            series: vec![Series {
                name: "z".into(),
                points: vec![(1.0, 0.0)],
            }],
        };
        assert!(render(&plot).ends_with("</svg>\n"));
        plot.series.clear();
        assert!(render(&plot).ends_with("</svg>\n"));
    }
}
