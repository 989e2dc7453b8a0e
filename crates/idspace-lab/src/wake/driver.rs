//! What the `wake_*` example drivers share: naming a runner, reading positional arguments,
//! and the median they print.

use idspace::sched::Policy;

use super::workloads::Runner;

/// The runner called `name`: `tokio`, or a wakeup policy's name (`locked`, `wakelist`,
/// `wakelist-always`) on our runtime with the kernel's placement.
pub fn runner(name: &str) -> Result<(String, Runner), String> {
    if name == "tokio" {
        return Ok((name.to_string(), Runner::Tokio));
    }
    let policy: Policy = name.parse().map_err(|e| format!("{e}"))?;
    Ok((name.to_string(), Runner::Ours(policy)))
}

/// Positional argument `at` of `args`, or `default` when absent.
pub fn arg<T: std::str::FromStr>(args: &[String], at: usize, default: T) -> Result<T, String> {
    match args.get(at) {
        None => Ok(default),
        Some(text) => text
            .parse()
            .map_err(|_| format!("argument {at}: cannot parse {text:?}")),
    }
}

/// The middle value of `values` (the upper one of two), sorting them in place.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
