//! `idspace bench --compare A.json B.json`: two lab runs side by side (two kernels, two
//! machines, two versions), every number both runs have, with the ratio B ÷ A.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::model::format_number;

/// One run's results file, read and checked to be a lab results file.
fn load(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    if !json["experiments"].is_array() {
        return Err(format!(
            "{} is not a lab results file (no \"experiments\" list)",
            path.display()
        ));
    }
    Ok(json)
}

/// The cell of experiment `experiment`, table `table`, row `label`, column `column`.
fn cell(run: &Value, experiment: &str, table: &str, label: &str, column: &str) -> Option<f64> {
    let section = run["experiments"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == experiment)?;
    let table = section["tables"]
        .as_array()?
        .iter()
        .find(|t| t["id"] == table)?;
    let index = table["columns"]
        .as_array()?
        .iter()
        .position(|c| c == column)?;
    let row = table["rows"]
        .as_array()?
        .iter()
        .find(|r| r["label"] == label)?;
    row["values"].get(index)?.as_f64()
}

/// A Markdown report of every number of run `a` that run `b` has too: per experiment and
/// table, one line per (row, column) with A, B and B ÷ A. Errors name the file that is wrong.
pub fn compare(a: &Path, b: &Path) -> Result<String, String> {
    let (run_a, run_b) = (load(a)?, load(b)?);
    let mut out = String::new();
    let machine = |run: &Value| {
        format!(
            "kernel {}, {} CPUs, {} scale, started {}",
            run["machine"]["kernel"].as_str().unwrap_or("unknown"),
            // A number, or "unknown" as the other fields say (not JSON's `null`).
            run["machine"]["cpus"]
                .as_u64()
                .map_or_else(|| "unknown".to_string(), |cpus| cpus.to_string()),
            run["scale"].as_str().unwrap_or("unknown"),
            run["machine"]["started"].as_str().unwrap_or("unknown")
        )
    };
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# Lab runs compared\n");
    let _ = writeln!(out, "- A: `{}`: {}", a.display(), machine(&run_a));
    let _ = writeln!(out, "- B: `{}`: {}", b.display(), machine(&run_b));
    let mut shared = 0;
    for section in run_a["experiments"].as_array().into_iter().flatten() {
        let name = section["name"].as_str().unwrap_or("");
        for table in section["tables"].as_array().into_iter().flatten() {
            let id = table["id"].as_str().unwrap_or("");
            // Each name keeps its position: the values are matched to columns by it, also
            // when a column of a damaged file has no name.
            let columns: Vec<(usize, &str)> = table["columns"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(index, column)| Some((index, column.as_str()?)))
                .collect();
            let mut lines = Vec::new();
            for row in table["rows"].as_array().into_iter().flatten() {
                let label = row["label"].as_str().unwrap_or("");
                for &(index, column) in &columns {
                    let Some(value_a) = row["values"].get(index).and_then(Value::as_f64) else {
                        continue;
                    };
                    let Some(value_b) = cell(&run_b, name, id, label, column) else {
                        continue;
                    };
                    let ratio = if value_a == 0.0 {
                        "n/a".to_string()
                    } else {
                        format!("{:.2}x", value_b / value_a)
                    };
                    lines.push(format!(
                        "| {label} | {column} | {} | {} | {ratio} |",
                        format_number(value_a, 2),
                        format_number(value_b, 2)
                    ));
                }
            }
            if lines.is_empty() {
                continue;
            }
            shared += lines.len();
            let unit = table["unit"].as_str().unwrap_or("");
            let _ = writeln!(out, "\n## {name}: {id} ({unit})\n");
            let _ = writeln!(
                out,
                "| row | column | A | B | B ÷ A |\n|---|---|---:|---:|---:|"
            );
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    if shared == 0 {
        return Err(format!(
            "{} and {} have no number in common (different experiments?)",
            a.display(),
            b.display()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, kernel: &str, value: f64) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "idspace-compare-{}-{name}.json",
            std::process::id()
        ));
        let json = serde_json::json!({
            "machine": {"kernel": kernel, "cpus": 2, "started": "now"},
            "scale": "quick",
            "experiments": [{"name": "mmcid", "tables": [{
                "id": "mmcid", "unit": "threads/s", "columns": ["this kernel"],
                "rows": [{"label": "8 pools", "values": [value]},
                         {"label": "only here", "values": [null]}]
            }]}]
        });
        std::fs::write(&path, json.to_string()).unwrap();
        path
    }

    #[test]
    fn shared_numbers_are_laid_side_by_side_with_ratios() {
        let (a, b) = (write("a", "6.18", 100.0), write("b", "6.19", 135.0));
        let text = compare(&a, &b).unwrap();
        assert!(
            text.contains("kernel 6.18") && text.contains("kernel 6.19"),
            "{text}"
        );
        assert!(
            text.contains("| 8 pools | this kernel | 100.00 | 135.00 | 1.35x |"),
            "{text}"
        );
        assert!(!text.contains("only here"), "{text}");
        std::fs::remove_file(a).unwrap();
        std::fs::remove_file(b).unwrap();
    }

    #[test]
    fn a_column_without_a_name_shifts_no_value() {
        let path = |name: &str| {
            std::env::temp_dir().join(format!(
                "idspace-compare-{}-{name}.json",
                std::process::id()
            ))
        };
        let run = |columns: serde_json::Value, values: serde_json::Value| {
            serde_json::json!({"experiments": [{"name": "e", "tables": [{
                "id": "t", "unit": "ms", "columns": columns,
                "rows": [{"label": "r", "values": values}]
            }]}]})
            .to_string()
        };
        let (a, b) = (path("unnamed-a"), path("unnamed-b"));
        std::fs::write(
            &a,
            run(serde_json::json!([1, "b"]), serde_json::json!([5.0, 7.0])),
        )
        .unwrap();
        std::fs::write(&b, run(serde_json::json!(["b"]), serde_json::json!([7.0]))).unwrap();
        let text = compare(&a, &b).unwrap();
        assert!(text.contains("| r | b | 7.00 | 7.00 | 1.00x |"), "{text}");
        // Without a machine: unknown, as every field says.
        assert!(text.contains("kernel unknown, unknown CPUs"), "{text}");
        std::fs::remove_file(a).unwrap();
        std::fs::remove_file(b).unwrap();
    }

    #[test]
    fn bad_files_are_named() {
        let missing = std::env::temp_dir().join("idspace-compare-missing.json");
        let error = compare(&missing, &missing).unwrap_err();
        assert!(
            error.contains("cannot read") && error.contains("missing"),
            "{error}"
        );
        let not_lab =
            std::env::temp_dir().join(format!("idspace-compare-{}-x.json", std::process::id()));
        std::fs::write(&not_lab, "{}").unwrap();
        let error = compare(&not_lab, &not_lab).unwrap_err();
        assert!(error.contains("not a lab results file"), "{error}");
        std::fs::write(&not_lab, "{").unwrap();
        assert!(compare(&not_lab, &not_lab)
            .unwrap_err()
            .contains("is not JSON"));
        std::fs::remove_file(not_lab).unwrap();
    }
}
