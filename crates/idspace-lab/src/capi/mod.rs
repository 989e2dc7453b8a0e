//! Experiment `capi`: the same operations called from C through libidspace (the C ABI, its
//! handle check and panic boundary included) and from Rust directly, against what a C
//! programmer would write instead: a shared `__atomic` counter, `_Thread_local` shards summed
//! through a registry, a `pthread_mutex` + array handle table, and glib's `GHashTable` under a
//! lock (when Debian's `libglib2.0-dev` is installed).
//!
//! The C side is `capi.c`, compiled at run time with the system's `cc` against the static
//! library cargo built for this binary, run once per cell; every run checks its result (exact
//! sums, lookups that find what was stored, every pooled object back).

mod cside;
mod rside;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::declare::{self, custom, Declared, Measurement, Sweep};
use crate::model::{Row, Section, Table};
use crate::{Context, Experiment, Scale};

/// The experiment.
pub struct CApi;

const THREADS: [usize; 3] = [1, 2, 8];
const FROM_C: &str = "idspace from C";
const FROM_RUST: &str = "idspace from Rust";
const ATOMIC: &str = "shared __atomic (C)";
const SHARDS: &str = "_Thread_local shards (C)";
const MUTEX: &str = "pthread_mutex + array (C)";
const GLIB: &str = "GHashTable under a lock (C)";

/// One operation family: its columns and how each runs.
struct Family {
    id: &'static str,
    what: &'static str,
    columns: Vec<&'static str>,
    /// The C program's bench for each C column.
    c_bench: fn(&str) -> Option<&'static str>,
    rust: fn(usize, Duration) -> Result<f64, String>,
    /// How long each cell's threads run at once.
    window: Duration,
}

/// A goal's outcome: what it says, the measured ratio, the bound.
type Goals = Rc<RefCell<Vec<(String, Option<f64>, f64)>>>;

impl Experiment for CApi {
    fn name(&self) -> &'static str {
        "capi"
    }

    fn about(&self) -> &'static str {
        "The C ABI: the same operations from C through libidspace vs from Rust, and C's alternatives"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let program = match cside::build() {
            Ok(program) => Some(Rc::new(program)),
            Err(reason) => {
                cx.notes.push(format!("The C columns are n/a: {reason}."));
                None
            }
        };
        if program.as_ref().is_some_and(|p| !p.glib) {
            cx.notes.push(format!(
                "\"{GLIB}\" is n/a: glib's development files (Debian's libglib2.0-dev) are not \
                 installed."
            ));
        }
        // Each cell's threads run at once for this long (the C side's as the Rust side's).
        let window = match cx.scale {
            Scale::Quick => Duration::from_millis(100),
            Scale::Full => Duration::from_millis(1000),
        };
        let goals: Goals = Rc::default();
        let mut measurements: Vec<Box<dyn Measurement>> = families(window)
            .into_iter()
            .map(|family| sweep(family, program.clone(), goals.clone()))
            .collect();
        let summary = goals.clone();
        measurements.push(custom(0, move |_| goals_table(&summary.borrow()).into()));
        let declared = Declared {
            name: self.name(),
            title: "The C ABI: libidspace from C vs Rust, and C's alternatives".into(),
            intro: vec![
                "Each operation called from C through libidspace's exported functions (a \
                 generation-checked handle, a panic boundary, no inlining across the library) \
                 and from Rust on the same structure directly. ns are per operation per thread \
                 (elapsed × threads ÷ operations); \"÷ idspace from Rust\" is the FFI overhead."
                    .into(),
            ],
            measurements,
            notes: vec![NOTE.into()],
        };
        Ok(declare::run(cx, declared))
    }
}

const NOTE: &str = "The C program is built with `cc -O2` against the release static library. \
    The counter from Rust is `PerCidCounter::add`, inlined into the loop; from C it is a call \
    into the library, which decodes the handle, loads its generation and counter, and runs \
    the same rseq section with a compare of the generation added. The pthread_mutex table and the glib table take their lock once per \
    create, lookup and remove, as a C program sharing them between threads must.";

fn families(window: Duration) -> Vec<Family> {
    vec![
        Family {
            id: "counter",
            what: "counter increment",
            columns: vec![FROM_C, FROM_RUST, ATOMIC, SHARDS],
            c_bench: |column| match column {
                FROM_C => Some("counter-idspace"),
                ATOMIC => Some("counter-atomic"),
                SHARDS => Some("counter-tls"),
                _ => None,
            },
            rust: rside::counter,
            window,
        },
        Family {
            id: "table",
            what: "table create + lookup + remove",
            columns: vec![FROM_C, FROM_RUST, MUTEX, GLIB],
            c_bench: |column| match column {
                FROM_C => Some("table-idspace"),
                MUTEX => Some("table-mutex"),
                GLIB => Some("table-glib"),
                _ => None,
            },
            rust: rside::table,
            window,
        },
        Family {
            id: "pid",
            what: "PID alloc + free (per-CPU design)",
            columns: vec![FROM_C, FROM_RUST],
            c_bench: |column| (column == FROM_C).then_some("pid-idspace"),
            rust: rside::pid,
            window,
        },
        Family {
            id: "pool",
            what: "pool give + take",
            columns: vec![FROM_C, FROM_RUST],
            c_bench: |column| (column == FROM_C).then_some("pool-idspace"),
            rust: rside::pool,
            window,
        },
        Family {
            id: "mmcid",
            what: "mm_cid read",
            columns: vec![FROM_C, FROM_RUST],
            c_bench: |column| (column == FROM_C).then_some("mmcid-idspace"),
            rust: rside::mm_cid,
            window,
        },
    ]
}

fn sweep(
    family: Family,
    program: Option<Rc<cside::Program>>,
    goals: Goals,
) -> Box<dyn Measurement> {
    let Family {
        id,
        what,
        columns,
        c_bench,
        rust,
        window,
    } = family;
    let names: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    Sweep::new(
        names,
        THREADS.to_vec(),
        move |threads| format!("{id}, {threads} threads"),
        move |column: &String, &threads| {
            let ns = match c_bench(column) {
                None => rust(threads, window)?,
                Some(bench) => match &program {
                    Some(program) if column == GLIB && !program.glib => {
                        return Err("glib's development files are not installed".into())
                    }
                    Some(program) => program.run(bench, threads, window)?,
                    None => return Err("the C program could not be built".into()),
                },
            };
            Ok(vec![ns])
        },
    )
    .tables(move |swept, cx| {
        let over = |t: usize| cx.oversubscribed(t);
        let mut rows = swept.numbers(0, 2, |&t| format!("ns per {what}, {t} threads{}", over(t)));
        rows.extend(swept.ratios(0, FROM_RUST, |&t| {
            format!("÷ idspace from Rust, {t} threads{}", over(t))
        }));
        rows.extend(swept.ratios(0, FROM_C, |&t| {
            format!("÷ idspace from C, {t} threads{}", over(t))
        }));
        record_goals(id, swept, &mut goals.borrow_mut());
        let title = format!(
            "{what}: ns per operation per thread; every cell's threads run at once for {} ms, or 4 \
             times as long if they did not (cells where they still did not are refused), median \
             of {}; {} CPUs",
            window.as_millis(),
            cx.repetitions(),
            cx.cpus()
        );
        swept.table(id, title, "ns, x", rows).into()
    })
}

/// The goals this family's results bear on.
fn record_goals(
    id: &str,
    swept: &declare::Swept<usize>,
    goals: &mut Vec<(String, Option<f64>, f64)>,
) {
    for (&threads, values) in swept.values(0) {
        let ratio = |top: &str, bottom: &str| Some(values.get(top)? / values.get(bottom)?);
        match (id, threads) {
            ("counter", 1) => goals.push((
                "counter increment: C ÷ Rust (at most)".into(),
                ratio(FROM_C, FROM_RUST),
                2.0,
            )),
            ("counter", t) if t >= 2 => goals.push((
                format!("counter, {t} threads: shared __atomic ÷ idspace from C (at least)"),
                ratio(ATOMIC, FROM_C),
                2.5,
            )),
            ("table", 2) => goals.push((
                "table, 2 threads: pthread_mutex table ÷ idspace from C (at least)".into(),
                ratio(MUTEX, FROM_C),
                2.0,
            )),
            _ => {}
        }
        if id != "counter" && threads == 1 {
            goals.push((
                format!("{id}: C ÷ Rust (reported)"),
                ratio(FROM_C, FROM_RUST),
                f64::NAN,
            ));
        }
    }
}

fn goals_table(goals: &[(String, Option<f64>, f64)]) -> Table {
    let rows = goals
        .iter()
        .map(|(what, measured, bound)| {
            let bound = (!bound.is_nan()).then_some(*bound);
            Row::ratios(what.clone(), vec![*measured, bound])
        })
        .collect();
    Table {
        id: "goals".into(),
        title: "The goals: measured ratios and their bounds (1 thread unless stated)".into(),
        unit: "x".into(),
        columns: vec!["measured".into(), "bound".into()],
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bench of the C program and every Rust workload runs and checks its own result
    /// (exact sums, lookups, objects back), at a few operations.
    #[test]
    fn every_operation_runs_from_c_and_from_rust() {
        let program = match cside::build() {
            Ok(program) => Some(program),
            Err(reason) => {
                eprintln!("!!! SKIPPED: the C side of experiment capi: {reason}");
                None
            }
        };
        for family in families(Duration::from_millis(20)) {
            for column in &family.columns {
                let ns = match ((family.c_bench)(column), &program) {
                    (None, _) => (family.rust)(2, family.window),
                    (Some(_), Some(program)) if *column == GLIB && !program.glib => continue,
                    (Some(bench), Some(program)) => program.run(bench, 2, family.window),
                    (Some(_), None) => continue,
                };
                let ns = match ns {
                    // A refusal with its reason is what a busy machine gets; the runs' own
                    // checks (sums, lookups, objects back) have passed by then.
                    Err(error)
                        if crate::measure::starved(&error)
                            || error.contains("did not all run at once") =>
                    {
                        eprintln!("{} / {column}: not measured here: {error}", family.id);
                        continue;
                    }
                    ns => ns.unwrap_or_else(|e| panic!("{} / {column}: {e}", family.id)),
                };
                assert!(ns > 0.0, "{} / {column}: {ns} ns", family.id);
            }
        }
    }
}
