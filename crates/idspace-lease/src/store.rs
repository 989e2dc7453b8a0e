//! [`Store`]: one connection to PostgreSQL, and every statement the crate sends.

use std::str::FromStr;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};

use crate::error::LeaseError;
use crate::schema::{EXHAUSTED, MIGRATIONS, MIGRATION_LOCK, UNKNOWN_SPACE};

/// How often a statement that failed on a serialisation failure or a deadlock is retried.
const RETRIES: u32 = 12;

/// A space's definition and where its leasing stands, as [`Store::space`] reads it (see
/// [`Store`] for one read from a server).
///
/// How many IDs a monotonic space lost to gaps, from its info and the count of IDs issued:
///
/// ```
/// use idspace_lease::SpaceInfo;
///
/// fn gaps(info: &SpaceInfo, issued: u64) -> u64 {
///     let leased = info.leased_through.map_or(0, |last| last + 1 - info.min);
///     leased - issued
/// }
///
/// let orders = SpaceInfo {
///     name: "orders".into(),
///     min: 1,
///     max: 1_000_000,
///     cyclic: false,
///     leased_through: Some(3000),
/// };
/// assert_eq!(gaps(&orders, 2936), 64); // one CPU's sub-range, carved and never issued
/// let fresh = SpaceInfo { min: 0, leased_through: None, ..orders };
/// assert_eq!(gaps(&fresh, 0), 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceInfo {
    /// The space's name.
    pub name: String,
    /// The smallest ID.
    pub min: u64,
    /// The largest ID.
    pub max: u64,
    /// Whether freed ranges are leased again.
    pub cyclic: bool,
    /// The last ID ever leased fresh (`min - 1` before the first lease, `None` then if `min`
    /// is 0).
    pub leased_through: Option<u64>,
}

/// A lease granted by [`Store::lease`] (see [`Store`] for one granted by a server).
///
/// ```
/// use idspace_lease::Grant;
///
/// let grant = Grant { lease: 17, epoch: 4, first: 1001, last: 2000 };
/// assert_eq!(grant.last - grant.first + 1, 1000, "the bounds are inclusive");
/// // Renewals name the lease by its row and the epoch it was granted with.
/// let held: Vec<(i64, i64)> = vec![(grant.lease, grant.epoch)];
/// assert_eq!(held, [(17, 4)]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The lease's row.
    pub lease: i64,
    /// The space's epoch at the grant: the lease is ours while its row carries it.
    pub epoch: i64,
    /// The IDs leased, inclusive.
    pub first: u64,
    /// The last ID leased.
    pub last: u64,
}

/// The longest a connection waits, once its socket is connected, for the server's handshake
/// and the schema's migration.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(5);

/// Parses a connection URL (`postgresql://…` or `key=value …`) into a client configuration.
pub fn parse_url(url: &str) -> Result<Config, LeaseError> {
    let mut config = Config::from_str(url).map_err(|e| LeaseError::BadUrl(e.to_string()))?;
    if config.get_hosts().is_empty() {
        return Err(LeaseError::BadUrl(format!("no host in \"{url}\"")));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(3));
    }
    Ok(config)
}

/// Whether a failed statement is worth retrying as is.
fn transient(error: &postgres::Error) -> bool {
    matches!(
        error.code(),
        Some(&SqlState::T_R_SERIALIZATION_FAILURE) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
    )
}

/// Names a store error after what the caller can do about it.
fn classify(error: postgres::Error, space: &str) -> LeaseError {
    match error.code().map(SqlState::code) {
        Some(UNKNOWN_SPACE) => LeaseError::UnknownSpace(space.to_string()),
        Some(EXHAUSTED) => LeaseError::Exhausted(space.to_string()),
        Some(code) if code == SqlState::UNIQUE_VIOLATION.code() => {
            LeaseError::SpaceExists(space.to_string())
        }
        Some(code) if code == SqlState::INSUFFICIENT_PRIVILEGE.code() => {
            LeaseError::PermissionDenied(describe(&error))
        }
        _ => LeaseError::StoreUnreachable(describe(&error)),
    }
}

/// Names a failed connection: the server refused the credentials, or there was no server to
/// talk to.
fn connect_error(error: postgres::Error) -> LeaseError {
    // SQLSTATE class 28, "invalid authorization specification": 28P01 for a wrong password,
    // 28000 for a role pg_hba.conf rejects or whose peer/ident check failed.
    let refused = error
        .code()
        .is_some_and(|code| code.code().starts_with("28"));
    // The client gives up before asking the server when it has no password to send; the
    // driver says so only in its message.
    let no_password = std::error::Error::source(&error)
        .is_some_and(|cause| cause.to_string() == "password missing");
    if refused || no_password {
        LeaseError::Authentication(describe(&error))
    } else {
        LeaseError::Connection(describe(&error))
    }
}

/// The error with the server's message, when the server sent one (`Display` shows only
/// "db error").
fn describe(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({}): {}", db.severity(), db.code().code(), db.message()),
        None => with_causes(error),
    }
}

/// `error`'s message followed by its causes' (the driver's "error connecting to server" says
/// nothing of why; its cause says "Connection refused"), each once.
fn with_causes(error: &postgres::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(why) = cause {
        let why_text = why.to_string();
        if !text.contains(&why_text) {
            text.push_str(": ");
            text.push_str(&why_text);
        }
        cause = why.source();
    }
    text
}

fn to_id(value: i64, what: &str) -> Result<u64, LeaseError> {
    u64::try_from(value).map_err(|_| LeaseError::StoreUnreachable(format!("negative {what}")))
}

fn to_db(value: u64, what: &str) -> Result<i64, LeaseError> {
    i64::try_from(value)
        .map_err(|_| LeaseError::InvalidSpace(format!("{what} {value} is above {}", i64::MAX)))
}

/// One connection to PostgreSQL, with the schema migrated.
///
/// What a [`Node`](crate::Node) does on its first lease, by hand, on a throwaway server:
///
/// ```
/// use std::time::Duration;
///
/// use idspace_lease::server::{Durability, Throwaway};
/// use idspace_lease::{Grant, LeaseError, SpaceInfo, Store};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = Throwaway::start(Durability { fsync: false })?;
/// let mut store = Store::connect(&server.url())?;
/// store.create_space("orders", 1, 1_000_000, false)?;
/// assert_eq!(
///     store.create_space("orders", 1, 10, false),
///     Err(LeaseError::SpaceExists("orders".into()))
/// );
///
/// let grant: Grant = store.lease("orders", "web-1", 1000, Duration::from_secs(10), None)?;
/// assert_eq!((grant.first, grant.last), (1, 1000));
/// let renewed = store.renew(&[(grant.lease, grant.epoch)], Duration::from_secs(10))?;
/// assert_eq!(renewed, [grant.lease], "the lease is still ours");
/// let info: SpaceInfo = store.space("orders")?;
/// assert_eq!((info.min, info.leased_through, info.cyclic), (1, Some(1000), false));
///
/// // "web-1" crashed: its lease's row is dropped, and its 1000 IDs are gaps.
/// assert_eq!(store.reclaim("orders", "web-1")?, 1000);
/// let next = store.lease("orders", "web-1", 1000, Duration::from_secs(10), None)?;
/// assert_eq!(next.first, 1001, "a monotonic space never hands out an ID twice");
/// # Ok(())
/// # }
/// ```
pub struct Store {
    client: Client,
}

impl Store {
    /// Connects to `url` and creates or migrates the crate's schema.
    ///
    /// # Errors
    /// [`LeaseError::BadUrl`] for a URL the client does not understand, else as
    /// [`connect_with`](Self::connect_with).
    pub fn connect(url: &str) -> Result<Store, LeaseError> {
        let config = parse_url(url)?;
        Store::connect_with(&config)
    }

    /// Connects with a parsed configuration and creates or migrates the schema.
    ///
    /// # Errors
    /// [`LeaseError::Authentication`] if the server refuses the credentials,
    /// [`LeaseError::Connection`] if no connection can be made.
    pub fn connect_with(config: &Config) -> Result<Store, LeaseError> {
        // The client's connect timeout bounds the socket's connect only: a server that accepts
        // and never answers (frozen, or a listener that is not PostgreSQL) would hold the
        // handshake forever. So the handshake and the migration run on a thread of their own,
        // waited for as long as the socket connects may take, plus HANDSHAKE_WAIT; a thread
        // left waiting ends with the connection.
        let hosts = u32::try_from(config.get_hosts().len().max(1)).unwrap_or(u32::MAX);
        let wait = config
            .get_connect_timeout()
            .map_or(Duration::ZERO, |each| each.saturating_mul(hosts))
            .saturating_add(HANDSHAKE_WAIT);
        let config = config.clone();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("idspace-connect".into())
            .spawn(move || {
                let connected = config
                    .connect(NoTls)
                    .map_err(connect_error)
                    .and_then(|client| {
                        let mut store = Store { client };
                        store.migrate().map(|()| store)
                    });
                let _ = sender.send(connected);
            })
            .map_err(|e| LeaseError::Connection(format!("no thread to connect on: {e}")))?;
        receiver.recv_timeout(wait).unwrap_or_else(|_| {
            Err(LeaseError::Connection(format!(
                "the server did not answer within {} s",
                wait.as_secs()
            )))
        })
    }

    /// Runs `f` in a transaction of several statements, retrying on serialisation failures
    /// and deadlocks.
    fn transaction<T>(
        &mut self,
        space: &str,
        mut f: impl FnMut(&mut postgres::Transaction<'_>) -> Result<T, postgres::Error>,
    ) -> Result<T, LeaseError> {
        self.retrying(space, |client| {
            let mut tx = client.transaction()?;
            let value = f(&mut tx)?;
            tx.commit()?;
            Ok(value)
        })
    }

    /// Runs `f`, one statement, as its own transaction (autocommit), retrying as
    /// [`transaction`](Self::transaction) does.
    ///
    /// One statement is one round trip, and the server commits it without waiting for the
    /// client: a node that is paused (`SIGSTOP`, a long GC pause, a VM migration) can never be
    /// caught between the statement and its `COMMIT` while holding the space's row lock, which
    /// would block every other node's leases until it resumed.
    fn statement<T>(
        &mut self,
        space: &str,
        f: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, LeaseError> {
        self.retrying(space, f)
    }

    /// Runs `attempt` until it succeeds, fails for good, or has retried [`RETRIES`] transient
    /// failures (serialisation failures and deadlocks).
    fn retrying<T>(
        &mut self,
        space: &str,
        mut attempt: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, LeaseError> {
        let mut attempts = 0;
        loop {
            match attempt(&mut self.client) {
                Ok(value) => return Ok(value),
                Err(error) if transient(&error) && attempts < RETRIES => {
                    attempts += 1;
                    // Back off 1 ms to 64 ms, spread by the clock's low bits so that the
                    // transactions that collided do not collide again in step.
                    let spread = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |t| u64::from(t.subsec_nanos()) % 1000);
                    let base = 1u64 << attempts.min(6);
                    std::thread::sleep(Duration::from_micros(base * 1000 + spread * base));
                }
                Err(error) => return Err(classify(error, space)),
            }
        }
    }

    fn migrate(&mut self) -> Result<(), LeaseError> {
        self.transaction("", |tx| {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS idspace_schema (version integer NOT NULL)",
            )?;
            let version: i32 = tx
                .query_one("SELECT coalesce(max(version), 0) FROM idspace_schema", &[])?
                .get(0);
            for (index, migration) in MIGRATIONS.iter().enumerate() {
                let target = index as i32 + 1;
                if target > version {
                    tx.batch_execute(migration)?;
                    tx.execute("INSERT INTO idspace_schema VALUES ($1)", &[&target])?;
                }
            }
            Ok(())
        })
    }

    /// The schema version reached.
    pub fn schema_version(&mut self) -> Result<i32, LeaseError> {
        self.statement("", |client| {
            Ok(client
                .query_one("SELECT max(version) FROM idspace_schema", &[])?
                .get(0))
        })
    }

    /// Creates a space of IDs `[min, max]`; `cyclic` spaces lease freed ranges again.
    pub fn create_space(
        &mut self,
        name: &str,
        min: u64,
        max: u64,
        cyclic: bool,
    ) -> Result<(), LeaseError> {
        if name.is_empty() || name.len() > 200 {
            return Err(LeaseError::InvalidSpace(format!(
                "name \"{name}\" must have 1 to 200 bytes"
            )));
        }
        if min > max {
            return Err(LeaseError::InvalidSpace(format!(
                "min {min} is above max {max}"
            )));
        }
        let (min_db, max_db) = (to_db(min, "min")?, to_db(max, "max")?);
        self.statement(name, |client| {
            client.execute(
                "INSERT INTO idspace_space (name, min_id, max_id, cyclic, leased_through) \
                 VALUES ($1, $2, $3, $4, $5)",
                &[&name, &min_db, &max_db, &cyclic, &(min_db - 1)],
            )
        })
        .map(|_| ())
    }

    /// The space called `name`.
    pub fn space(&mut self, name: &str) -> Result<SpaceInfo, LeaseError> {
        let row = self.statement(name, |client| {
            client.query_opt(
                "SELECT min_id, max_id, cyclic, leased_through FROM idspace_space \
                 WHERE name = $1",
                &[&name],
            )
        })?;
        let row = row.ok_or_else(|| LeaseError::UnknownSpace(name.to_string()))?;
        let through: i64 = row.get(3);
        Ok(SpaceInfo {
            name: name.to_string(),
            min: to_id(row.get(0), "min")?,
            max: to_id(row.get(1), "max")?,
            cyclic: row.get(2),
            leased_through: u64::try_from(through).ok(),
        })
    }

    /// Leases up to `step` IDs of `space` for `node`, for `ttl`, in one round trip; `retire`
    /// names the node's previous lease of a monotonic space, used up, to drop.
    pub fn lease(
        &mut self,
        space: &str,
        node: &str,
        step: u64,
        ttl: Duration,
        retire: Option<i64>,
    ) -> Result<Grant, LeaseError> {
        let step = to_db(step.max(1), "step")?;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let row = self.statement(space, |client| {
            client.query_one(
                "SELECT * FROM idspace_lease($1, $2, $3, $4, $5)",
                &[&space, &node, &step, &ttl_ms, &retire],
            )
        })?;
        Ok(Grant {
            lease: row.get(0),
            epoch: row.get(1),
            first: to_id(row.get(2), "first ID")?,
            last: to_id(row.get(3), "last ID")?,
        })
    }

    /// Extends the leases named by (row, epoch) to `ttl` from now, in one round trip; returns
    /// the rows renewed (a lease missing was taken over: its epoch changed).
    pub fn renew(&mut self, leases: &[(i64, i64)], ttl: Duration) -> Result<Vec<i64>, LeaseError> {
        let ids: Vec<i64> = leases.iter().map(|&(id, _)| id).collect();
        let epochs: Vec<i64> = leases.iter().map(|&(_, epoch)| epoch).collect();
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let rows = self.statement("", |client| {
            client.query(
                "UPDATE idspace_lease l \
                 SET expires_at = now() + $3::bigint * interval '1 millisecond' \
                 FROM unnest($1::bigint[], $2::bigint[]) AS h(id, epoch) \
                 WHERE l.id = h.id AND l.epoch = h.epoch RETURNING l.id",
                &[&ids, &epochs, &ttl_ms],
            )
        })?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// Returns a cyclic lease whose every ID was freed; `false` if it was not ours any more.
    pub fn give_back(&mut self, lease: i64, epoch: i64) -> Result<bool, LeaseError> {
        self.statement("", |client| {
            Ok(client
                .query_one("SELECT idspace_return($1, $2)", &[&lease, &epoch])?
                .get(0))
        })
    }

    /// Parks the unused tails of a monotonic node's leases for the same `node` to lease first
    /// at its next start, and drops every lease row of `node` in `space`, in one round trip.
    /// `tails` names each lease by (row, epoch) and the first ID of its unused tail; a lease
    /// no longer the node's (taken over) parks nothing. Returns the IDs parked (0 in a cyclic
    /// space, whose leases are returned or taken over instead).
    pub fn park(
        &mut self,
        space: &str,
        node: &str,
        tails: &[(i64, i64, u64)],
    ) -> Result<u64, LeaseError> {
        let ids: Vec<i64> = tails.iter().map(|t| t.0).collect();
        let epochs: Vec<i64> = tails.iter().map(|t| t.1).collect();
        let firsts = tails
            .iter()
            .map(|t| to_db(t.2, "first ID"))
            .collect::<Result<Vec<i64>, _>>()?;
        let parked: i64 = self.statement(space, |client| {
            Ok(client
                .query_one(
                    "SELECT idspace_park($1, $2, $3, $4, $5)",
                    &[&space, &node, &ids, &epochs, &firsts],
                )?
                .get(0))
        })?;
        to_id(parked, "parked count")
    }

    /// Drops the lease rows that a process of identity `node` left in `space` without a
    /// graceful stop (it crashed, or lost its store), and returns how many IDs they held: at
    /// most that many IDs were never issued, the gap the crash left. Call it before a node of
    /// that identity starts; node identities must be unique among running nodes.
    pub fn reclaim(&mut self, space: &str, node: &str) -> Result<u64, LeaseError> {
        let held: i64 = self.statement(space, |client| {
            Ok(client
                .query_one(
                    "WITH gone AS (DELETE FROM idspace_lease WHERE space = $1 AND node = $2 \
                     RETURNING last_id - first_id + 1 AS n) \
                     SELECT coalesce(sum(n), 0)::bigint FROM gone",
                    &[&space, &node],
                )?
                .get(0))
        })?;
        to_id(held, "reclaimed count")
    }

    /// The raw client, for callers that measure PostgreSQL itself (the lab's baselines).
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}
