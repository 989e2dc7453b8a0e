//! [`Throwaway`]: a PostgreSQL server of the system's binaries in a temporary directory, for
//! the tests and the lab.
//!
//! The binaries (`initdb`, `pg_ctl`) are looked up on `PATH`, then in
//! `/usr/lib/postgresql/*/bin` (Debian's layout; the newest version wins). The server listens
//! only on a Unix socket inside its directory, so servers never collide on a port. `initdb`
//! refuses to run as root: under root the server runs as `nobody`, and its directory belongs
//! to that user.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Counts servers of this process, for unique directory names.
static SERVERS: AtomicU32 = AtomicU32::new(0);

/// How the server runs.
///
/// ```
/// use idspace_lease::server::Durability;
///
/// // Tests want cheap commits; a measurement of PostgreSQL as production runs it wants
/// // every commit on disk. `Throwaway::start` takes one of the two (see `Throwaway`).
/// let (tests, baselines) = (Durability { fsync: false }, Durability { fsync: true });
/// assert_ne!(tests, baselines);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    /// `fsync` and `synchronous_commit` on, as a production server runs (the lab's
    /// baselines); off makes commits cheap (the tests).
    pub fsync: bool,
}

/// A throwaway PostgreSQL server: stopped and deleted when dropped.
///
/// It needs PostgreSQL's binaries (see the [module](self)). Stopped and started again, it
/// keeps its data, as a server that went down for a while does:
///
/// ```
/// use idspace_lease::server::{Durability, Throwaway};
/// use idspace_lease::{LeaseError, Store};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = Throwaway::start(Durability { fsync: false })?;
/// Store::connect(&server.url())?.create_space("orders", 1, 1000, false)?;
/// server.stop()?;
/// assert!(matches!(Store::connect(&server.url()), Err(LeaseError::Connection(_))));
/// server.start_again()?;
/// assert_eq!(Store::connect(&server.url())?.space("orders")?.max, 1000);
/// # Ok(())
/// # }
/// ```
pub struct Throwaway {
    bin: PathBuf,
    dir: PathBuf,
    user: Option<(u32, u32)>,
    durability: Durability,
}

/// The directory holding `initdb` and `pg_ctl`: on `PATH` (followed through links), else the
/// newest `/usr/lib/postgresql/*/bin`.
pub fn find_binaries() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("initdb"))
        .find(|initdb| initdb.is_file())
        .and_then(|initdb| fs::canonicalize(initdb).ok())
        .and_then(|initdb| initdb.parent().map(Path::to_path_buf));
    if let Some(dir) = on_path.filter(|dir| dir.join("pg_ctl").is_file()) {
        return Ok(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| "PostgreSQL not found: no initdb on PATH nor in /usr/lib/postgresql/*/bin (apt-get install postgresql)".to_string())?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "PostgreSQL not found: no initdb in /usr/lib/postgresql/*/bin".to_string())
}

/// The user the server runs as when we are root: `nobody` from /etc/passwd (65534 if absent).
fn unprivileged() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    let nobody = passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() > 3 && fields[0] == "nobody")
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
            .flatten()
    });
    Some(nobody.unwrap_or((65534, 65534)))
}

impl Throwaway {
    /// Creates a cluster in a new temporary directory and starts it.
    pub fn start(durability: Durability) -> Result<Throwaway, String> {
        let bin = find_binaries()?;
        let dir = std::env::temp_dir().join(format!(
            "idspace-pg-{}-{}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let user = unprivileged();
        let server = Throwaway {
            bin,
            dir,
            user,
            durability,
        };
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&server.dir, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", server.dir.display()))?;
        }
        server.run(
            "initdb",
            [
                OsStr::new("-D"),
                server.data().as_os_str(),
                OsStr::new("-U"),
                OsStr::new("postgres"),
                OsStr::new("-A"),
                OsStr::new("trust"),
                OsStr::new("-E"),
                OsStr::new("UTF8"),
                OsStr::new("--no-sync"),
            ],
        )?;
        server.start_again()?;
        Ok(server)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Runs one of the server's binaries as the server's user; its output on failure.
    fn run<'a>(&self, tool: &str, args: impl IntoIterator<Item = &'a OsStr>) -> Result<(), String> {
        let mut command = Command::new(self.bin.join(tool));
        command
            .args(args)
            .current_dir(&self.dir)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some((uid, gid)) = self.user {
            command.uid(uid).gid(gid);
        }
        let output = command.output().map_err(|e| format!("{tool}: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{tool} failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    /// Starts the server (again, after [`stop`](Throwaway::stop)), waiting until it accepts
    /// connections.
    pub fn start_again(&self) -> Result<(), String> {
        let fsync = if self.durability.fsync { "on" } else { "off" };
        let options = format!(
            "-k {} -c listen_addresses='' -p 5432 -c fsync={fsync} -c synchronous_commit={fsync} \
             -c max_connections=200 -c shared_buffers=32MB",
            self.dir.display()
        );
        let log = self.dir.join("server.log");
        self.run(
            "pg_ctl",
            [
                OsStr::new("-D"),
                self.data().as_os_str(),
                OsStr::new("-l"),
                log.as_os_str(),
                OsStr::new("-o"),
                OsStr::new(&options),
                OsStr::new("-w"),
                OsStr::new("start"),
            ],
        )
    }

    /// Stops the server (fast shutdown: sessions are cut), waiting until it is down.
    pub fn stop(&self) -> Result<(), String> {
        self.run(
            "pg_ctl",
            [
                OsStr::new("-D"),
                self.data().as_os_str(),
                OsStr::new("-m"),
                OsStr::new("fast"),
                OsStr::new("-w"),
                OsStr::new("stop"),
            ],
        )
    }

    /// Adds a login role with a password, which must pass `method` (a `pg_hba.conf` method:
    /// `scram-sha-256`, `md5`, `peer`) to connect over the server's socket, and restarts the
    /// server to load the rule: a server on which authentication can fail, for tests of it.
    /// The role and the password are plain words (ASCII letters, digits, `_`).
    pub fn add_role(&self, role: &str, password: &str, method: &str) -> Result<(), String> {
        let word = |text: &str| {
            !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !(word(role) && word(password) && word(&method.replace('-', "_"))) {
            return Err(format!(
                "not plain words: {role:?}, {password:?}, {method:?}"
            ));
        }
        let mut client = postgres::Client::connect(&self.url(), postgres::NoTls)
            .map_err(|e| format!("connect: {e}"))?;
        client
            .batch_execute(&format!("CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
            .map_err(|e| format!("CREATE ROLE {role}: {e}"))?;
        drop(client);
        // The first matching line wins: put the role's line before the catch-all `trust`.
        let hba = self.data().join("pg_hba.conf");
        let rules = fs::read_to_string(&hba).map_err(|e| format!("{}: {e}", hba.display()))?;
        fs::write(&hba, format!("local all {role} {method}\n{rules}"))
            .map_err(|e| format!("{}: {e}", hba.display()))?;
        self.stop()?;
        self.start_again()
    }

    /// Freezes the server: its processes stop (`SIGSTOP`), so that it accepts connections and
    /// never answers, as a hung server or a partition under an open connection does. For tests
    /// of what a client does then; [`thaw`](Throwaway::thaw) lets it run on.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// use idspace_lease::server::{Durability, Throwaway};
    /// use idspace_lease::{LeaseError, Store};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = Throwaway::start(Durability { fsync: false })?;
    /// let mut store = Store::connect(&server.url())?;
    /// server.freeze()?;
    /// // A new connection is refused once the handshake has waited its limit.
    /// let url = format!("{} connect_timeout=1", server.url());
    /// let started = Instant::now();
    /// assert!(matches!(Store::connect(&url), Err(LeaseError::Connection(_))));
    /// assert!(started.elapsed() < Duration::from_secs(10));
    /// server.thaw()?;
    /// store.create_space("orders", 1, 1000, false)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn freeze(&self) -> Result<(), String> {
        self.signal(libc::SIGSTOP)
    }

    /// Lets a [frozen](Throwaway::freeze) server run on (`SIGCONT`).
    pub fn thaw(&self) -> Result<(), String> {
        self.signal(libc::SIGCONT)
    }

    /// Sends `signal` to the server's processes: the postmaster, named in its pid file, and
    /// its children.
    fn signal(&self, signal: libc::c_int) -> Result<(), String> {
        let pid_file = self.data().join("postmaster.pid");
        let text =
            fs::read_to_string(&pid_file).map_err(|e| format!("{}: {e}", pid_file.display()))?;
        let postmaster: libc::pid_t = text
            .lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .ok_or_else(|| format!("{}: no process ID", pid_file.display()))?;
        let mut pids = vec![postmaster];
        pids.extend(children(postmaster));
        for pid in pids {
            // SAFETY: `kill` takes any PID and signal number and only reports errors; these
            // are the server's own processes (one that exited meanwhile is an ESRCH, ignored).
            unsafe { libc::kill(pid, signal) };
        }
        Ok(())
    }

    /// The connection string of the server, for [`crate::Node::builder`] and `idspace ids`.
    pub fn url(&self) -> String {
        format!(
            "host={} port=5432 user=postgres dbname=postgres",
            self.dir.display()
        )
    }
}

/// The processes whose parent is `parent`, from `/proc`.
fn children(parent: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<libc::pid_t>().ok()?;
            let stat = fs::read_to_string(entry.path().join("stat")).ok()?;
            // The fields after the command's closing parenthesis: state, then the parent's PID.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            (ppid.parse::<libc::pid_t>().ok()? == parent).then_some(pid)
        })
        .collect()
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        // A frozen server would hold the stop below until it ran again.
        let _ = self.thaw();
        let _ = self.run(
            "pg_ctl",
            [
                OsStr::new("-D"),
                self.data().as_os_str(),
                OsStr::new("-m"),
                OsStr::new("immediate"),
                OsStr::new("-w"),
                OsStr::new("stop"),
            ],
        );
        let _ = fs::remove_dir_all(&self.dir);
    }
}
