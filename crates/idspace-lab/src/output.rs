//! What a lab run leaves in its output folder: `report.md`, `results.json` and the SVG plots.
//!
//! `results.json` is read by other programs, so its shape is fixed (the README documents it,
//! and a test below checks it):
//!
//! ```text
//! { "machine": { "cpus", "cpu_model", "kernel", "memory_gib", "started" },
//!   "scale": "quick" | "full",
//!   "experiments": [ { "name", "title", "intro": [..], "notes": [..],
//!       "tables": [ { "id", "title", "unit", "columns": [..],
//!                     "rows": [ { "label", "values": [number | null], "text": [..] } ] } ],
//!       "plots": [ { "file", "title", "x_label", "y_label", "log_x", "log_y",
//!                    "series": [ { "name", "points": [[x, y]] } ] } ] } ] }
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::machine::Machine;
use crate::model::Section;
use crate::stalls::Conditions;
use crate::{report, svg, Scale};

/// The whole of `results.json`.
#[derive(Serialize)]
struct Results<'a> {
    machine: &'a Machine,
    scale: Scale,
    experiments: &'a [Section],
}

/// The folder a run writes into.
pub(crate) struct Output {
    dir: PathBuf,
}

impl Output {
    /// The folder `dir`, created if missing and checked writable (a probe file is written and
    /// removed), so that a run that could not save its results fails before it measures
    /// anything.
    pub(crate) fn prepare(dir: &Path) -> Result<Output, String> {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let probe = dir.join(".idspace-lab-write-probe");
        fs::write(&probe, b"probe").map_err(|e| {
            format!(
                "cannot write into {} (tried {}): {e}",
                dir.display(),
                probe.display()
            )
        })?;
        fs::remove_file(&probe).map_err(|e| format!("cannot remove {}: {e}", probe.display()))?;
        Ok(Output {
            dir: dir.to_path_buf(),
        })
    }

    /// Writes the SVG plots of `section`.
    pub(crate) fn write_plots(&self, section: &Section) -> Result<(), String> {
        for plot in &section.plots {
            write(&self.dir.join(&plot.file), svg::render(plot))?;
        }
        Ok(())
    }

    /// Writes `report.md` and `results.json` for the sections measured so far (the machine's
    /// stalls go in the report only).
    pub(crate) fn write_results(
        &self,
        machine: &Machine,
        conditions: &Conditions,
        scale: Scale,
        sections: &[Section],
    ) -> Result<(), String> {
        write(
            &self.dir.join("report.md"),
            report::render(machine, conditions, scale.name(), sections),
        )?;
        write(
            &self.dir.join("results.json"),
            results_json(machine, scale, sections)?,
        )
    }

    /// Where `report.md` goes.
    pub(crate) fn report_path(&self) -> PathBuf {
        self.dir.join("report.md")
    }
}

fn write(path: &Path, contents: String) -> Result<(), String> {
    fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `results.json`'s text.
fn results_json(machine: &Machine, scale: Scale, sections: &[Section]) -> Result<String, String> {
    let results = Results {
        machine,
        scale,
        experiments: sections,
    };
    serde_json::to_string_pretty(&results).map_err(|e| format!("cannot encode results.json: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::model::{Plot, Row, Series, Table};

    #[test]
    fn prepare_creates_the_folder_and_leaves_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("idspace-lab-prepare-{}", std::process::id()));
        let nested = dir.join("a/b");
        Output::prepare(&nested).unwrap();
        let left: Vec<_> = fs::read_dir(&nested).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn prepare_refuses_a_folder_it_cannot_write() {
        // Nobody, root included, can create files in /proc/self.
        let error = Output::prepare(Path::new("/proc/self")).err().unwrap();
        assert!(error.starts_with("cannot write into /proc/self"), "{error}");
    }

    /// The keys of a JSON object, in order.
    fn keys(value: &Value) -> Vec<&str> {
        value
            .as_object()
            .unwrap_or_else(|| panic!("an object: {value}"))
            .keys()
            .map(String::as_str)
            .collect()
    }

    /// Other programs read `results.json`: its keys must not drift.
    #[test]
    fn results_json_keeps_its_shape() {
        let machine = Machine {
            cpus: 2,
            cpu_model: "model".into(),
            kernel: "6.18".into(),
            memory_gib: 8,
            started: "2026-11-23 13:00:00 UTC".into(),
        };
        let section = Section {
            name: "timers".into(),
            title: "Timers".into(),
            intro: vec!["intro".into()],
            tables: vec![Table {
                id: "test1".into(),
                title: "Test 1".into(),
                unit: "ms".into(),
                columns: vec!["global".into(), "scaled".into()],
                rows: vec![Row::numbers("create", vec![Some(1.5), None], 1)],
            }],
            plots: vec![Plot {
                file: "p.svg".into(),
                title: "plot".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                log_x: false,
                log_y: true,
                series: vec![Series {
                    name: "global".into(),
                    points: vec![(1.0, 2.0)],
                }],
            }],
            notes: vec!["note".into()],
        };
        let text = results_json(&machine, Scale::Quick, &[section]).unwrap();
        let json: Value = serde_json::from_str(&text).unwrap();

        assert_eq!(keys(&json), ["machine", "scale", "experiments"]);
        assert_eq!(
            keys(&json["machine"]),
            ["cpus", "cpu_model", "kernel", "memory_gib", "started"]
        );
        assert_eq!(json["machine"]["cpus"], 2);
        assert_eq!(json["scale"], "quick");
        let experiment = &json["experiments"][0];
        assert_eq!(
            keys(experiment),
            ["name", "title", "intro", "tables", "plots", "notes"]
        );
        assert_eq!(experiment["name"], "timers");
        let table = &experiment["tables"][0];
        assert_eq!(keys(table), ["id", "title", "unit", "columns", "rows"]);
        assert_eq!(table["columns"], serde_json::json!(["global", "scaled"]));
        let row = &table["rows"][0];
        assert_eq!(keys(row), ["label", "values", "text"]);
        assert_eq!(row["label"], "create");
        assert_eq!(row["values"], serde_json::json!([1.5, null]));
        assert_eq!(row["text"], serde_json::json!(["1.5", "n/a"]));
        let plot = &experiment["plots"][0];
        assert_eq!(
            keys(plot),
            ["file", "title", "x_label", "y_label", "log_x", "log_y", "series"]
        );
        assert_eq!(keys(&plot["series"][0]), ["name", "points"]);
        assert_eq!(plot["series"][0]["points"], serde_json::json!([[1.0, 2.0]]));
    }
}
