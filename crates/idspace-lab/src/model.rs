//! What an experiment produces: tables, plots and notes, serialised to `results.json` and
//! rendered to `report.md`.

use serde::Serialize;

/// One experiment's results.
#[derive(Debug, Serialize)]
pub struct Section {
    /// The experiment's name on the command line.
    pub name: String,
    /// A heading for the report.
    pub title: String,
    /// Markdown paragraphs before the tables: what was run and how.
    pub intro: Vec<String>,
    /// The result tables.
    pub tables: Vec<Table>,
    /// The plots (SVG files written beside the report).
    pub plots: Vec<Plot>,
    /// Markdown paragraphs after the tables: caveats, limits met, observations.
    pub notes: Vec<String>,
}

/// A table laid out like the kernel patches' benchmark tables: one row per measured quantity, one
/// column per design.
#[derive(Debug, Serialize)]
pub struct Table {
    /// Short identifier, unique within the section (used in the JSON).
    pub id: String,
    /// Heading shown above the table.
    pub title: String,
    /// The unit of the numbers ("ms", "ns/op", "bytes", "x").
    pub unit: String,
    /// Column headings (designs).
    pub columns: Vec<String>,
    /// The rows.
    pub rows: Vec<Row>,
}

/// One table row.
#[derive(Debug, Serialize)]
pub struct Row {
    /// The row's label ("create", "lookup", "create vs scaled").
    pub label: String,
    /// One cell per column; `None` where the column has no value (with the reason in `text`).
    pub values: Vec<Option<f64>>,
    /// How each cell is shown.
    pub text: Vec<String>,
}

impl Row {
    /// A row of numbers shown with `digits` decimals; `None` cells show `n/a`.
    pub fn numbers(
        label: impl Into<String>,
        values: impl Into<Vec<Option<f64>>>,
        digits: usize,
    ) -> Row {
        let values = values.into();
        let text = values
            .iter()
            .map(|v| v.map_or_else(|| "n/a".to_string(), |v| format_number(v, digits)))
            .collect();
        Row {
            label: label.into(),
            values,
            text,
        }
    }

    /// A row of ratios (shown as `2.31x`).
    pub fn ratios(label: impl Into<String>, values: impl Into<Vec<Option<f64>>>) -> Row {
        let values = values.into();
        let text = values
            .iter()
            .map(|v| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}x")))
            .collect();
        Row {
            label: label.into(),
            values,
            text,
        }
    }
}

/// `value` with `digits` decimals and thousands separators.
pub fn format_number(value: f64, digits: usize) -> String {
    let text = format!("{value:.digits$}");
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let (sign, digits_only) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, ch) in digits_only.chars().enumerate() {
        if i > 0 && (digits_only.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    match frac {
        Some(frac) => format!("{sign}{grouped}.{frac}"),
        None => format!("{sign}{grouped}"),
    }
}

/// A line plot: one series per design.
#[derive(Debug, Serialize)]
pub struct Plot {
    /// File name of the SVG, relative to the report.
    pub file: String,
    /// Title drawn above the plot.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Whether the x axis is logarithmic.
    pub log_x: bool,
    /// Whether the y axis is logarithmic.
    pub log_y: bool,
    /// The series.
    pub series: Vec<Series>,
}

/// One line of a plot.
#[derive(Debug, Serialize)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(format_number(1234567.891, 1), "1,234,567.9");
        assert_eq!(format_number(-1234.0, 0), "-1,234");
        assert_eq!(format_number(12.0, 2), "12.00");
    }
}
