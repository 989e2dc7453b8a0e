//! `idspace`: the lab (`bench`), the replay driver (`replay`) and leased IDs (`ids`).

mod ids;
mod replay;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use idspace_lab as lab;

// The lab measures memory with it; it counts nothing unless a lab measurement runs, so
// `replay` pays one relaxed load per allocation (see `idspace_lab::alloc`).
#[global_allocator]
static ALLOCATOR: lab::alloc::CountingAlloc = lab::alloc::CountingAlloc;

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
    Bench {
        /// Experiments to run (all by default); `--list` shows them.
        experiments: Vec<String>,
        /// Reduced sizes that fit in a few minutes on 2 cores (the default).
        #[arg(long, conflicts_with = "full")]
        quick: bool,
        /// The seeds' sizes where the machine allows.
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
    },
    /// Drive a design from JSON lines on stdin; one JSON answer per line on stdout.
    #[command(after_help = "`idspace replay FAMILY --help` shows the family's protocol.")]
    Replay {
        #[command(subcommand)]
        family: Family,
    },
    /// IDs unique across a cluster, leased from PostgreSQL: N IDs, one per line, on stdout;
    /// or, with --create-space, a new space.
    Ids {
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
        /// How long a lease lasts without renewal, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        ttl_ms: u64,
        /// The smallest lease, in IDs.
        #[arg(long, default_value_t = 1000)]
        step: u64,
    },
}

#[derive(Subcommand)]
enum Family {
    /// Handle tables keyed by (owner, id): the POSIX-timer ID designs.
    #[command(after_help = replay::help(replay::table::PROTOCOL))]
    Table {
        /// Which design to drive.
        #[arg(long, value_enum)]
        design: replay::table::TableDesign,
    },
    /// Concurrency IDs: the MM CID rewrite and its two predecessors.
    #[command(after_help = replay::help(replay::cid::PROTOCOL))]
    Cid {
        /// Which design to drive.
        #[arg(long, value_enum)]
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
        /// Which design to drive.
        #[arg(long, value_enum)]
        design: replay::pid::PidDesign,
    },
    /// Processes: namespaces, thread groups, zombies, timers, checkpoint and restore.
    #[command(after_help = replay::help(replay::process::PROTOCOL))]
    Process {
        /// Which PID design allocates the threads' IDs.
        #[arg(long, value_enum)]
        pid_design: replay::pid::PidDesign,
        /// Which table design holds the processes' timers.
        #[arg(long, value_enum)]
        table_design: replay::table::TableDesign,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Bench {
            experiments,
            quick: _,
            full,
            out,
            list,
            compare,
        } => {
            if let Some(files) = compare {
                return match lab::compare(&files[0], &files[1]) {
                    Ok(text) => {
                        print!("{text}");
                        ExitCode::SUCCESS
                    }
                    Err(error) => {
                        eprintln!("idspace bench: {error}");
                        ExitCode::from(2)
                    }
                };
            }
            if list {
                return match lab::select(&experiments) {
                    Ok(selected) => {
                        for experiment in selected {
                            println!("{:<10} {}", experiment.name(), experiment.about());
                        }
                        ExitCode::SUCCESS
                    }
                    Err(error) => {
                        eprintln!("idspace bench: {error}");
                        ExitCode::from(2)
                    }
                };
            }
            let scale = if full {
                lab::Scale::Full
            } else {
                lab::Scale::Quick
            };
            match lab::run(&experiments, scale, &out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("idspace bench: {error}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Ids {
            url,
            space,
            count,
            threads,
            create_space,
            min,
            max,
            cyclic,
            ttl_ms,
            step,
        } => ids::run(ids::Ids {
            url,
            space,
            count,
            threads: usize::from(threads),
            create_space,
            min,
            max,
            cyclic,
            ttl: std::time::Duration::from_millis(ttl_ms),
            step,
        }),
        Command::Replay { family } => {
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
                            eprintln!("idspace replay: {error}");
                            return ExitCode::from(2);
                        }
                    }
                }
            };
            ended.exit_code()
        }
    }
}
