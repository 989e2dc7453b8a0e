//! `idspace ids`: IDs leased from PostgreSQL, one per line on stdout, or a space created.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use idspace_lease::{LeaseError, Node, Store};

/// IDs a thread formats before it takes stdout's lock to write them.
const BATCH: usize = 4096;

/// What `idspace ids` was asked.
pub struct Ids {
    /// The server's connection URL.
    pub url: String,
    /// The space to allocate from.
    pub space: Option<String>,
    /// IDs to write.
    pub count: Option<u64>,
    /// Allocating threads.
    pub threads: usize,
    /// The space to create instead.
    pub create_space: Option<String>,
    /// Its smallest ID.
    pub min: Option<u64>,
    /// Its largest ID.
    pub max: Option<u64>,
    /// Whether it leases freed ranges again.
    pub cyclic: bool,
    /// The lease TTL.
    pub ttl: Duration,
    /// The smallest lease.
    pub step: u64,
}

/// Runs `idspace ids`; errors go to stderr, naming what is wrong.
pub fn run(ids: Ids) -> ExitCode {
    match execute(ids) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Not eprintln!, which panics when stderr fails: the status still tells.
            let _ = writeln!(io::stderr(), "idspace ids: {error}");
            ExitCode::from(1)
        }
    }
}

fn execute(ids: Ids) -> Result<(), String> {
    if let Some(name) = &ids.create_space {
        let (Some(min), Some(max)) = (ids.min, ids.max) else {
            return Err("--create-space needs --min and --max".into());
        };
        let mut store = Store::connect(&ids.url).map_err(|e| e.to_string())?;
        return store
            .create_space(name, min, max, ids.cyclic)
            .map_err(|e| e.to_string());
    }
    let (Some(space), Some(count)) = (&ids.space, ids.count) else {
        return Err("give --space NAME --count N, or --create-space NAME --min A --max B".into());
    };
    let node = Node::builder(&ids.url, space)
        .ttl(ids.ttl)
        .step(ids.step, ids.step.max(1 << 20))
        .start()
        .map_err(|e| e.to_string())?;
    let threads = ids.threads.max(1) as u64;
    let stdout = Mutex::new(Output {
        out: io::stdout(),
        error: None,
    });
    let failed: Mutex<Option<LeaseError>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let share = count / threads + u64::from(thread < count % threads);
            let (node, stdout, failed, stop) = (&node, &stdout, &failed, &stop);
            scope.spawn(move || {
                let mut text = String::with_capacity(BATCH * 12);
                let mut pending = 0;
                for _ in 0..share {
                    // Relaxed: a stop flag; a few more IDs after another thread failed are fine.
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    match node.next_id() {
                        Ok(id) => {
                            text.push_str(&id.to_string());
                            text.push('\n');
                            pending += 1;
                        }
                        Err(error) => {
                            stop.store(true, Ordering::Relaxed);
                            failed
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(error);
                            break;
                        }
                    }
                    if pending == BATCH {
                        write(stdout, &text, stop);
                        text.clear();
                        pending = 0;
                    }
                }
                write(stdout, &text, stop);
            });
        }
    });
    let Output { mut out, error } = stdout.into_inner().unwrap_or_else(|p| p.into_inner());
    let flushed = match error {
        Some(error) => Err(error),
        None => out.flush(),
    };
    if let Some(error) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(error.to_string());
    }
    match flushed {
        // The reader closed its end (`idspace ids … | head -1`): it has all it wanted.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        flushed => flushed.map_err(|e| format!("stdout: {e}")),
    }
}

/// Stdout, and the first error writing to it.
struct Output {
    out: io::Stdout,
    error: Option<io::Error>,
}

/// Writes a batch of lines; a failed stdout stops every thread, and its error is kept for the
/// exit status (a full disk must not look like IDs written).
fn write(stdout: &Mutex<Output>, text: &str, stop: &AtomicBool) {
    if text.is_empty() {
        return;
    }
    let mut output = stdout.lock().unwrap_or_else(|p| p.into_inner());
    if output.error.is_some() {
        return;
    }
    if let Err(error) = output.out.write_all(text.as_bytes()) {
        output.error = Some(error);
        stop.store(true, Ordering::Relaxed);
    }
}
