//! `idspace-serve`: the service alone, with the flags of `idspace serve` (the tests and the
//! lab start it; users run `idspace serve`).

use clap::Parser;

/// Cluster-unique IDs over HTTP, from leases of PostgreSQL.
#[derive(Parser)]
#[command(name = "idspace-serve", version, about, after_help = idspace_serve::HELP)]
struct Cli {
    #[command(flatten)]
    serve: idspace_serve::Args,
}

fn main() -> std::process::ExitCode {
    idspace_serve::run(Cli::parse().serve)
}
