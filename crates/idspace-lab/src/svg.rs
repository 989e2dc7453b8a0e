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
    let usable = |&(x, y): &(f64, f64)| {
        x.is_finite() && y.is_finite() && (!plot.log_y || y > 0.0) && (!plot.log_x || x > 0.0)
    };
    let series: Vec<&Series> = plot
        .series
        .iter()
        .filter(|s| s.points.iter().any(usable))
        .collect();
    let points: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(usable)
        .collect();
    let fx = |x: f64| if plot.log_x { x.log10() } else { x };
    let (mut x_min, mut x_max) = bounds(points.iter().map(|p| fx(p.0)));
    let ys = points
        .iter()
        .map(|p| if plot.log_y { p.1.log10() } else { p.1 });
    let (mut y_min, mut y_max) = bounds(ys);
    if !plot.log_y {
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
    if plot.log_y {
        y_min -= y_pad;
    }
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (fx(x) - x_min) / (x_max - x_min) * plot_w;
    let sy = |y: f64| {
        let y = if plot.log_y { y.log10() } else { y };
        TOP + plot_h - (y - y_min) / (y_max - y_min) * plot_h
    };

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(&plot.title)
    );
    // Axes.
    let _ = writeln!(
        svg,
        r#"<path d="M{LEFT},{TOP} V{} H{}" stroke="black" fill="none"/>"#,
        TOP + plot_h,
        LEFT + plot_w
    );
    // Ticks on the x axis: at the measured x values when there are few, else evenly spaced.
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let x_ticks: Vec<f64> = if !xs.is_empty() && xs.len() <= 8 {
        xs
    } else {
        (0..=5)
            .map(|i| {
                let t = x_min + (x_max - x_min) * f64::from(i) / 5.0;
                if plot.log_x {
                    10f64.powf(t)
                } else {
                    t
                }
            })
            .collect()
    };
    for &x in &x_ticks {
        let px = sx(x);
        let _ = writeln!(
            svg,
            r##"<line x1="{px}" y1="{}" x2="{px}" y2="{}" stroke="#ccc"/><text x="{px}" y="{}" text-anchor="middle">{}</text>"##,
            TOP,
            TOP + plot_h,
            TOP + plot_h + 16.0,
            tick(x)
        );
    }
    for i in 0..=5 {
        let fy = y_min + (y_max - y_min) * f64::from(i) / 5.0;
        let value = if plot.log_y { 10f64.powf(fy) } else { fy };
        let py = TOP + plot_h - (fy - y_min) / (y_max - y_min) * plot_h;
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{py}" x2="{}" y2="{py}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            py + 4.0,
            tick(value)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 18.0,
        escape(&plot.x_label)
    );
    let _ = writeln!(
        svg,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(&plot.y_label)
    );
    for (index, series) in series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let path: Vec<String> = series
            .points
            .iter()
            .filter(|p| usable(p))
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
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
        let lx = LEFT + plot_w + 15.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            escape(&series.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
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
