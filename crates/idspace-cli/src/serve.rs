//! `idspace serve`: the ID service over HTTP, from the `idspace-serve` crate when the build
//! has the `serve` feature; without it the command keeps its place in `--help` and says which
//! feature it needs.

use std::process::ExitCode;

/// `idspace serve`'s flags: the service's own.
#[cfg(feature = "serve")]
pub type ServeArgs = idspace_serve::Args;

/// `idspace serve`'s flags in a build without the service: taken as they come, unread.
#[cfg(not(feature = "serve"))]
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The service's flags (this build cannot run it).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    _flags: Vec<String>,
}

/// Runs the service until SIGTERM or SIGINT.
#[cfg(feature = "serve")]
pub fn run(args: ServeArgs) -> ExitCode {
    idspace_serve::run(args)
}

/// `idspace serve` in a build without the service.
#[cfg(not(feature = "serve"))]
pub fn run(_: ServeArgs) -> ExitCode {
    crate::missing_feature("serve")
}
