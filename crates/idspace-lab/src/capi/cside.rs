//! The C side: `capi.c` compiled at run time with the system's `cc` against libidspace's static
//! library (the one cargo built next to this binary), and run once per measurement.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The C program's source, and the header it includes.
const SOURCE: &str = include_str!("capi.c");
const HEADER: &str = include_str!("../../../idspace-ffi/include/idspace.h");
/// What a Rust static library needs from the system when linked into a C program.
const NATIVE_LIBS: &[&str] = &["-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-lgcc_s"];

/// The compiled C program, deleted with its directory when dropped.
pub(crate) struct Program {
    dir: PathBuf,
    binary: PathBuf,
    /// Whether it was built with glib's `GHashTable`.
    pub glib: bool,
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// libidspace's static library as cargo built it for this binary: next to it (tests) or in
/// its `deps` directory (`cargo run`).
fn static_lib() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let dir = exe.parent().ok_or("this program has no directory")?;
    [
        dir.join("libidspace_ffi.a"),
        dir.join("deps/libidspace_ffi.a"),
    ]
    .into_iter()
    .find(|path| path.exists())
    .ok_or_else(|| {
        format!(
            "libidspace's static library is not in {} or its deps/",
            dir.display()
        )
    })
}

/// glib's compile and link flags, if its development files are installed.
fn glib_flags() -> Option<Vec<String>> {
    let output = Command::new("pkg-config")
        .args(["--cflags", "--libs", "glib-2.0"])
        .output()
        .ok()?;
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    })
}

/// Builds the C program; an error saying why it cannot be (no `cc`, no static library).
pub(crate) fn build() -> Result<Program, String> {
    let lib = static_lib()?;
    let dir = std::env::temp_dir().join(format!("idspace-capi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("cannot write {name}: {e}"))
    };
    write("capi.c", SOURCE)?;
    write("idspace.h", HEADER)?;
    let glib = glib_flags();
    let binary = dir.join("capi");
    let mut command = Command::new("cc");
    command
        .args(["-std=gnu11", "-O2", "-pthread", "-I"])
        .arg(&dir);
    if glib.is_some() {
        command.arg("-DHAVE_GLIB");
    }
    command.arg(dir.join("capi.c")).arg(&lib).args(NATIVE_LIBS);
    if let Some(flags) = &glib {
        command.args(flags);
    }
    command.arg("-o").arg(&binary);
    let program = Program {
        dir,
        binary,
        glib: glib.is_some(),
    };
    let output = command
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cc failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(program)
}

impl Program {
    /// Runs `bench` on `threads` threads at once for `window`; ns per operation per thread, as
    /// the program measured it. A run whose threads did not all run at once is made again
    /// once with a window four times as long (as [`window_or_longer`] does), then refused.
    ///
    /// [`window_or_longer`]: crate::measure::window_or_longer
    pub(crate) fn run(&self, bench: &str, threads: usize, window: Duration) -> Result<f64, String> {
        self.run_once(bench, threads, window)
            .or_else(|_| self.run_once(bench, threads, window * 4))
    }

    fn run_once(&self, bench: &str, threads: usize, window: Duration) -> Result<f64, String> {
        let millis = window.as_millis().max(1).to_string();
        let output = Command::new(&self.binary)
            .args([bench, &threads.to_string(), &millis])
            .output()
            .map_err(|e| format!("cannot run the C program: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "{bench}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let text = String::from_utf8_lossy(&output.stdout);
        text.trim()
            .parse()
            .map_err(|_| format!("{bench}: unreadable answer {text:?}"))
    }
}
