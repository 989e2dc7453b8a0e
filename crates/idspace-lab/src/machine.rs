//! What the report says about the machine it ran on.

use serde::Serialize;

/// The machine and the moment of a lab run.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPUs available to this process.
    pub cpus: usize,
    /// The CPU model from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// The running kernel's release (`uname -r`).
    pub kernel: String,
    /// Total memory.
    pub memory_gib: u64,
    /// When the run started (UTC, seconds since the epoch and as text).
    pub started: String,
}

impl Machine {
    /// Reads the machine's description; fields that cannot be read say "unknown".
    pub fn probe() -> Machine {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some((kib + (1 << 19)) >> 20)
            })
            .unwrap_or(0);
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Machine {
            cpus,
            cpu_model,
            kernel,
            memory_gib,
            started: utc_text(secs),
        }
    }
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (civil-from-days, proleptic Gregorian).
fn utc_text(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_text_is_civil_time() {
        assert_eq!(super::utc_text(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc_text(1_795_338_000), "2026-11-22 09:00:00 UTC");
    }
}
