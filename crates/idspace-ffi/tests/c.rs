//! The C tests under `tests/c/`, built with the system's `cc`/`c++` against the static library
//! cargo built for this test binary (`target/<profile>/deps/libidspace_ffi.a`) and run:
//!
//! * `api.c` with `-fsanitize=address,undefined` (checked with `nm` to really link
//!   AddressSanitizer), and once without sanitizers under `valgrind --error-exitcode=1`, where
//!   rseq is unsupported, so the per-CID structures run their fallback (compact thread IDs);
//! * `stress.c`: 8 threads on each structure at once, under both sanitizers;
//! * `header.cpp`: the header as C++17;
//! * the README's C example, taken from the README and built exactly as the README says
//!   against a temporary prefix that `install.sh` filled.
//!
//! A missing tool (a compiler without the sanitizers, no valgrind, no pkg-config) is a loud
//! skip: a line on stderr that names it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What a Rust static library needs from the system when linked into a C program.
const NATIVE_LIBS: &[&str] = &["-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-lgcc_s"];

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The directory cargo built this test's library into (the test binary's own directory).
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .expect("the test binary has a directory")
        .to_path_buf()
}

/// The static library, as cargo built it for this test run.
fn static_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let lib = deps_dir().join("libidspace_ffi.a");
        assert!(
            lib.exists(),
            "cargo did not build {} for this test run",
            lib.display()
        );
        lib
    })
}

/// A scratch directory for this test binary's programs.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Under the target directory, replaced by each run: nothing is left in /tmp.
        let dir = deps_dir().with_file_name("idspace-ffi-c");
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    })
}

fn loud_skip(what: &str) {
    eprintln!("!!! SKIPPED: {what}");
}

/// How long any one command may take: minutes more than the slowest (the stress program under
/// ThreadSanitizer or valgrind on a loaded machine), so that a program that hangs (a spin-wait
/// whose condition never comes) fails the test instead of holding it forever.
const DEADLINE: Duration = Duration::from_secs(600);

fn run(command: &mut Command) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    // The pipes are drained while the program runs, so that a full pipe cannot stop it.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{command:?} did not finish within {DEADLINE:?}; killed");
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("waiting for {command:?}: {e}"),
        }
    };
    let output = Output {
        status,
        stdout: stdout.join().expect("the stdout reader"),
        stderr: stderr.join().expect("the stderr reader"),
    };
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Compiles `source` (under tests/c/) with `compiler` and `flags` against the static library.
fn build(compiler: &str, source: &str, name: &str, flags: &[&str]) -> PathBuf {
    let out = scratch().join(name);
    let mut command = Command::new(compiler);
    command
        .args(flags)
        .arg("-g")
        .arg("-Wall")
        .arg("-Wextra")
        .arg("-Werror")
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join("tests/c").join(source))
        .arg(static_lib())
        .args(NATIVE_LIBS)
        .arg("-o")
        .arg(&out);
    run(&mut command);
    out
}

/// Whether `cc` can build and link a program with `flags`.
fn compiler_supports(flags: &[&str]) -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    *PROBE.get_or_init(|| {
        let source = scratch().join("probe.c");
        std::fs::write(&source, "int main(void) { return 0; }\n").expect("write the probe");
        Command::new("cc")
            .args(flags)
            .arg(&source)
            .arg("-o")
            .arg(scratch().join("probe"))
            .output()
            .is_ok_and(|output| output.status.success())
    })
}

const SANITIZERS: &[&str] = &[
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
];

fn sanitized(source: &str, name: &str) -> Option<PathBuf> {
    if !compiler_supports(SANITIZERS) {
        loud_skip(&format!(
            "{source} under AddressSanitizer and UBSan: cc lacks -fsanitize=address,undefined"
        ));
        return None;
    }
    let mut flags = vec!["-std=c11", "-O1", "-pthread"];
    flags.extend_from_slice(SANITIZERS);
    let program = build("cc", source, name, &flags);
    let symbols = run(Command::new("nm").arg(&program));
    assert!(
        String::from_utf8_lossy(&symbols.stdout).contains("__asan_init"),
        "{name} does not link AddressSanitizer"
    );
    Some(program)
}

fn sanitizer_env(command: &mut Command) -> &mut Command {
    command
        .env(
            "ASAN_OPTIONS",
            "detect_leaks=1:abort_on_error=0:halt_on_error=1",
        )
        .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
}

#[test]
fn the_api_under_address_and_undefined_behaviour_sanitizers() {
    if let Some(program) = sanitized("api.c", "api-asan") {
        run(sanitizer_env(&mut Command::new(program)));
    }
}

#[test]
fn eight_threads_on_every_structure_under_the_sanitizers() {
    if let Some(program) = sanitized("stress.c", "stress-asan") {
        run(sanitizer_env(&mut Command::new(program)));
    }
}

#[test]
fn the_api_under_valgrind_on_the_fallback_path() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        loud_skip("api.c under valgrind: valgrind is not installed");
        return;
    }
    let program = build("cc", "api.c", "api-plain", &["-std=c11", "-O1", "-pthread"]);
    let output = run(Command::new("valgrind")
        .args(["--error-exitcode=1", "--quiet", "--leak-check=no"])
        .arg(program));
    // valgrind does not support rseq: the CID reads must report "unavailable".
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("idspace_mm_cid() = -"),
        "under valgrind: {stdout}"
    );
}

#[test]
fn the_header_compiles_as_cpp17() {
    let program = build(
        "c++",
        "header.cpp",
        "header-cpp",
        &["-std=c++17", "-pthread"],
    );
    run(&mut Command::new(program));
}

#[test]
fn the_header_compiles_as_c11_with_pedantic_warnings() {
    let source = scratch().join("pedantic.c");
    std::fs::write(
        &source,
        "#include \"idspace.h\"\nint main(void) { return 0; }\n",
    )
    .expect("write");
    run(Command::new("cc")
        .args([
            "-std=c11",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-I",
        ])
        .arg(crate_dir().join("include"))
        .arg(&source));
}

#[test]
fn the_readme_example_builds_with_pkg_config_after_install() {
    if Command::new("pkg-config")
        .arg("--version")
        .output()
        .is_err()
    {
        loud_skip("the README's pkg-config example: pkg-config is not installed");
        return;
    }
    // A prefix given relative to the installer's directory, used from another one: the
    // installed paths are absolute.
    let prefix = scratch().join("prefix");
    run(Command::new(crate_dir().join("install.sh"))
        .arg("prefix")
        .current_dir(scratch())
        .env("IDSPACE_LIB_DIR", deps_dir()));
    let build = scratch().join("build");
    std::fs::create_dir_all(&build).expect("a build directory");
    std::fs::write(build.join("example.c"), readme_example()).expect("write the example");
    // Exactly the README's command, through a shell, with the prefix's pkgconfig dir.
    run(Command::new("sh")
        .arg("-c")
        .arg("cc example.c $(pkg-config --cflags --libs idspace)")
        .current_dir(&build)
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")));
    let output = run(&mut Command::new(build.join("a.out")));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("owner 1, id 0 -> 42"), "{stdout}");
    assert!(stdout.contains("not a live handle"), "{stdout}");
}

/// The README's C example: its one ```` ```c ```` block.
fn readme_example() -> String {
    let readme = std::fs::read_to_string(crate_dir().join("../../README.md")).expect("the README");
    let start = readme.find("```c\n").expect("the README has a C example") + "```c\n".len();
    let end = start + readme[start..].find("```").expect("the C example ends");
    readme[start..end].to_string()
}
