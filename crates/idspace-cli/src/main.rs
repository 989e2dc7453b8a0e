//! `idspace`: the lab (`bench`), the replay driver (`replay`), leased IDs (`ids`) and the ID
//! service over HTTP (`serve`).
//!
//! Cargo features, all on by default, choose the subcommands that do work:
//!
//! - `bench`: the lab and its peers (`idspace-lab`), and the counting allocator it measures
//!   memory with;
//! - `ids`: the lease client and its PostgreSQL driver (`idspace-lease`);
//! - `serve`: the ID service over HTTP (`idspace-serve`: hyper, tokio, the lease client).
//!
//! `replay` needs none of them: `--no-default-features` builds a small binary that replays
//! alone. The other subcommands stay in the command line and its `--help` in every build, so
//! that a script's typo is still told apart from a missing feature: run in a build without
//! their feature, they exit with status 2 and a message naming the feature.

#[cfg(feature = "ids")]
mod ids;
mod serve;

use std::io::{self, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use idspace_cli::replay;

// The lab measures memory with it; it counts nothing unless a lab measurement runs, so
// `replay` pays one relaxed load per allocation (see `idspace_lab::alloc`). Builds without
// the lab keep the system allocator.
#[cfg(feature = "bench")]
#[global_allocator]
static ALLOCATOR: idspace_lab::alloc::CountingAlloc = idspace_lab::alloc::CountingAlloc;

/// The Linux kernel's task-ID machinery in user space: the lab and the replay driver.
#[derive(Parser)]
#[command(name = "idspace", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the lab: experiments against our designs, the peers and the kernel, with a report.
    Bench(BenchArgs),
    /// Drive a design from JSON lines on stdin; one JSON answer per line on stdout.
    #[command(after_help = "`idspace replay FAMILY --help` shows the family's protocol.")]
    Replay {
        #[command(subcommand)]
        family: Family,
    },
    /// IDs unique across a cluster, leased from PostgreSQL: N IDs, one per line, on stdout;
    /// or, with --create-space, a new space.
    Ids(IdsArgs),
    /// Cluster-unique IDs over HTTP, from leases of PostgreSQL: one process is one node.
    #[cfg_attr(feature = "serve", command(after_help = idspace_serve::HELP))]
    Serve(serve::ServeArgs),
}

// `idspace bench`'s flags (the variant's doc comment is the command's help).
#[derive(Args)]
struct BenchArgs {
    /// Experiments to run (all by default); `--list` shows them.
    experiments: Vec<String>,
    /// Reduced sizes that fit in a few minutes on 2 cores (the default).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The patch series' own sizes where the machine allows.
    #[arg(long)]
    full: bool,
    /// Where report.md, results.json and the plots go.
    #[arg(long, default_value = "lab")]
    out: PathBuf,
    /// List the experiments (those named, or all) and exit.
    #[arg(long)]
    list: bool,
    /// Run nothing: lay two results.json files side by side (e.g. two kernels), with
    /// ratios, as Markdown on stdout.
    #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with = "list")]
    compare: Option<Vec<PathBuf>>,
}

// `idspace ids`'s flags (the variant's doc comment is the command's help).
#[derive(Args)]
struct IdsArgs {
    /// The server: `postgresql://user@host:port/db` or `host=/run/postgresql user=u ...`.
    #[arg(long)]
    url: String,
    /// The space to allocate from.
    #[arg(long, requires = "count", conflicts_with = "create_space")]
    space: Option<String>,
    /// IDs to write.
    #[arg(long)]
    count: Option<u64>,
    /// Threads allocating.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: u16,
    /// Create a space with this name instead (IDs --min..=--max).
    #[arg(long, requires_all = ["min", "max"])]
    create_space: Option<String>,
    /// The new space's smallest ID.
    #[arg(long)]
    min: Option<u64>,
    /// The new space's largest ID (at most 2^63-1).
    #[arg(long)]
    max: Option<u64>,
    /// The new space leases ranges freed by every ID again (default: monotonic).
    #[arg(long)]
    cyclic: bool,
    /// How long a lease lasts without renewal, in milliseconds (100, a tenth of a second, to
    /// 86400000, a day).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    ttl_ms: u64,
    /// The smallest lease, in IDs (1 to 2^63-1).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    step: u64,
}

#[derive(Subcommand)]
enum Family {
    /// Handle tables keyed by (owner, id): the POSIX-timer ID designs.
    #[command(after_help = replay::help(replay::table::PROTOCOL))]
    Table {
        /// Which design to drive. The default is the kernel's current design (Linux 6.15), so
        /// that a bare `replay table` answers as the kernel does.
        #[arg(long, value_enum, default_value_t = replay::table::TableDesign::Scaled)]
        design: replay::table::TableDesign,
    },
    /// Concurrency IDs: the MM CID rewrite and its two predecessors.
    #[command(after_help = replay::help(replay::cid::PROTOCOL))]
    Cid {
        /// Which design to drive. The default is the kernel's current design (the MM CID
        /// rewrite, Linux 6.19), so that a bare `replay cid` answers as the kernel does.
        #[arg(long, value_enum, default_value_t = replay::cid::CidDesign::Rework)]
        design: replay::cid::CidDesign,
        /// CPUs (worker slots) of the space, 1 to 64 (the most the designs support); by default
        /// this machine's CPU count, at most 64.
        #[arg(
            long,
            value_parser = clap::value_parser!(u16).range(1..=idspace::cid::MAX_CPUS as i64),
            default_value_t = replay::cid::default_cpus(),
        )]
        cpus: u16,
    },
    /// Namespaced PID allocation: the IDR designs, FreeBSD's bitmap+hash, per-CPU ranges.
    #[command(after_help = replay::help(replay::pid::PROTOCOL))]
    Pid {
        /// Which design to drive. The default is the kernel's current design (Linux 7.0), so
        /// that a bare `replay pid` answers as the kernel does.
        #[arg(long, value_enum, default_value_t = replay::pid::PidDesign::IdrOnce)]
        design: replay::pid::PidDesign,
    },
    /// Processes: namespaces, thread groups, zombies, timers, checkpoint and restore.
    #[command(after_help = replay::help(replay::process::PROTOCOL))]
    Process {
        /// Which PID design allocates the threads' IDs. The default is the kernel's current
        /// design (Linux 7.0), so that a bare `replay process` answers as the kernel does.
        #[arg(long, value_enum, default_value_t = replay::pid::PidDesign::IdrOnce)]
        pid_design: replay::pid::PidDesign,
        /// Which table design holds the processes' timers. The default is the kernel's current
        /// design (Linux 6.15), so that a bare `replay process` answers as the kernel does.
        #[arg(long, value_enum, default_value_t = replay::table::TableDesign::Scaled)]
        table_design: replay::table::TableDesign,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage(&error),
    };
    match cli.command {
        Command::Bench(args) => bench(args),
        Command::Replay { family } => replay(family),
        Command::Ids(args) => ids(args),
        Command::Serve(args) => serve::run(args),
    }
}

/// Prints a usage error (or the help or version asked for) and says how to exit: `idspace ids`
/// exits with status 1 on every error, as its interface promises; the other commands with
/// clap's status (2 for a usage error).
fn usage(error: &clap::Error) -> ExitCode {
    // Printing can fail only if stderr or stdout is gone, and then there is no one to tell.
    let _ = error.print();
    let ids = std::env::args_os()
        .nth(1)
        .is_some_and(|command| command == "ids");
    if ids && error.use_stderr() {
        ExitCode::from(1)
    } else {
        ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
    }
}

/// `idspace bench`: a comparison, a listing or a lab run.
#[cfg(feature = "bench")]
fn bench(args: BenchArgs) -> ExitCode {
    use idspace_lab as lab;
    let done = if let Some(files) = args.compare {
        lab::compare(&files[0], &files[1]).and_then(|text| print_out(&text))
    } else if args.list {
        lab::select(&args.experiments).and_then(|selected| {
            let text: String = selected
                .iter()
                .map(|experiment| format!("{:<10} {}\n", experiment.name(), experiment.about()))
                .collect();
            print_out(&text)
        })
    } else {
        let scale = if args.full {
            lab::Scale::Full
        } else {
            lab::Scale::Quick
        };
        lab::run(&args.experiments, scale, &args.out)
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Not eprintln!, which panics when stderr fails: the status still tells.
            let _ = writeln!(io::stderr(), "idspace bench: {error}");
            ExitCode::from(2)
        }
    }
}

/// Writes `text` to stdout: an error for a stdout that fails (where `print!` would panic),
/// nothing for one its reader closed early (`idspace bench --list | head -1`).
#[cfg(feature = "bench")]
fn print_out(text: &str) -> Result<(), String> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => Err(format!("stdout: {error}")),
        _ => Ok(()),
    }
}

/// `idspace bench` in a build without the lab.
#[cfg(not(feature = "bench"))]
fn bench(_: BenchArgs) -> ExitCode {
    missing_feature("bench")
}

/// `idspace ids`: leased IDs, or a new space.
#[cfg(feature = "ids")]
fn ids(args: IdsArgs) -> ExitCode {
    ids::run(ids::Ids {
        url: args.url,
        space: args.space,
        count: args.count,
        threads: usize::from(args.threads),
        create_space: args.create_space,
        min: args.min,
        max: args.max,
        cyclic: args.cyclic,
        ttl: std::time::Duration::from_millis(args.ttl_ms),
        step: args.step,
    })
}

/// `idspace ids` in a build without the lease client.
#[cfg(not(feature = "ids"))]
fn ids(_: IdsArgs) -> ExitCode {
    missing_feature("ids")
}

/// Says that this build lacks `feature`, and how to get it; exit status 2.
#[cfg(not(all(feature = "bench", feature = "ids", feature = "serve")))]
pub(crate) fn missing_feature(feature: &str) -> ExitCode {
    let _ = writeln!(
        io::stderr(),
        "idspace {feature}: this build lacks the `{feature}` feature; build with the default \
         features, or with `--features {feature}`"
    );
    ExitCode::from(2)
}

/// `idspace replay FAMILY`: answers stdin's lines on stdout.
fn replay(family: Family) -> ExitCode {
    let stdin = io::stdin().lock();
    let stdout = io::stdout().lock();
    let ended = match family {
        Family::Table { design } => {
            replay::run(&mut replay::table::TableReplay::new(design), stdin, stdout)
        }
        Family::Pid { design } => {
            replay::run(&mut replay::pid::PidReplay::new(design), stdin, stdout)
        }
        Family::Process {
            pid_design,
            table_design,
        } => replay::run(
            &mut replay::process::ProcessReplay::new(pid_design, table_design),
            stdin,
            stdout,
        ),
        Family::Cid { design, cpus } => {
            match replay::cid::CidReplay::new(design, usize::from(cpus)) {
                Ok(mut replayer) => replay::run(&mut replayer, stdin, stdout),
                Err(error) => {
                    let _ = writeln!(io::stderr(), "idspace replay: {error}");
                    return ExitCode::from(2);
                }
            }
        }
    };
    ended.exit_code()
}
