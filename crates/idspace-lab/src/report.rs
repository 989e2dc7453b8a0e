//! Renders sections into `report.md`, with tables laid out like the kernel patches' benchmark
//! tables (quantities as rows, designs as columns).

use std::fmt::Write;

use super::machine::Machine;
use super::model::{Section, Table};
use super::stalls::Conditions;

/// The whole report.
pub(crate) fn render(
    machine: &Machine,
    conditions: &Conditions,
    scale: &str,
    sections: &[Section],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# idspace lab report\n");
    let _ = writeln!(
        out,
        "Scale: **{scale}**. Machine: {} CPUs ({}), Linux {}, {} GiB. Run at {}.\n",
        machine.cpus, machine.cpu_model, machine.kernel, machine.memory_gib, machine.started
    );
    let _ = writeln!(
        out,
        "How to read this report: every table comes from one run, with every design measured \
         in that run, one after the other. Absolute times on a shared 2-core machine are noisy; \
         each cell is the median of the repetitions stated, and the ratio rows (design ÷ \
         reference column) are the figures to quote. Where a test runs more threads than the \
         machine has cores, it says so: those threads are oversubscribed, and the contention \
         they show is scheduling contention as much as cache-line contention.\n"
    );
    let _ = writeln!(out, "{}", conditions.paragraph());
    for section in sections {
        let _ = writeln!(out, "## {}\n", section.title);
        for paragraph in &section.intro {
            let _ = writeln!(out, "{paragraph}\n");
        }
        for table in &section.tables {
            render_table(&mut out, table);
        }
        for plot in &section.plots {
            let _ = writeln!(out, "![{}]({})\n", plot.title, plot.file);
        }
        for note in &section.notes {
            let _ = writeln!(out, "{note}\n");
        }
    }
    out
}

fn render_table(out: &mut String, table: &Table) {
    let _ = writeln!(out, "**{}** ({})\n", table.title, table.unit);
    let _ = write!(out, "| |");
    for column in &table.columns {
        let _ = write!(out, " {column} |");
    }
    let _ = write!(out, "\n|---|");
    for _ in &table.columns {
        let _ = write!(out, "---:|");
    }
    out.push('\n');
    for row in &table.rows {
        let _ = write!(out, "| {} |", row.label);
        for cell in &row.text {
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Row;

    #[test]
    fn tables_have_designs_as_columns() {
        let table = Table {
            id: "t".into(),
            title: "Test 1".into(),
            unit: "ms".into(),
            columns: vec!["global".into(), "scaled".into()],
            rows: vec![Row::numbers("create", vec![Some(23.0), None], 1)],
        };
        let mut out = String::new();
        render_table(&mut out, &table);
        assert!(out.contains("| | global | scaled |"), "{out}");
        assert!(out.contains("| create | 23.0 | n/a |"), "{out}");
    }
}
