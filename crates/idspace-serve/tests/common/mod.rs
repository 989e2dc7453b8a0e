//! What the service's tests share: a throwaway PostgreSQL, `idspace-serve` processes on
//! loopback, a small HTTP/1.1 client over std's sockets, and ID bookkeeping.

#![allow(dead_code)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idspace_lease::server::{Durability, Throwaway};
use idspace_lease::Store;

/// A fresh server (fsync off: the tests check correctness, not durability).
pub fn postgres() -> Throwaway {
    Throwaway::start(Durability { fsync: false }).expect("PostgreSQL starts")
}

/// The server the tests of one binary share (each in spaces of its own): starting one costs
/// seconds. It is stopped and deleted when the test binary exits.
static SHARED: Mutex<Option<Throwaway>> = Mutex::new(None);

/// Stops the shared server at exit.
extern "C" fn stop_shared() {
    // No panic may cross this extern "C" boundary.
    let _ = std::panic::catch_unwind(|| {
        let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        drop(shared.take());
    });
}

/// The URL of the shared server, started on first use.
pub fn shared_url() -> String {
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if shared.is_none() {
        *shared = Some(postgres());
        // SAFETY: `stop_shared` is an extern "C" fn that catches every panic.
        unsafe { libc::atexit(stop_shared) };
    }
    shared.as_ref().expect("started").url()
}

/// Creates a monotonic space of IDs 1..=`max` on the server at `url`.
pub fn space_at(url: &str, name: &str, max: u64) {
    Store::connect(url)
        .expect("connects")
        .create_space(name, 1, max, false)
        .expect("space created");
}

/// Runs `f`, failing the test if it takes longer than `limit` (the work goes on in its
/// thread, but the test no longer waits for it).
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(f());
    });
    match receiver.recv_timeout(limit) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the test took longer than {limit:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the test failed (see above)"),
    }
}

/// An `idspace-serve` process on a free loopback port, with its log collected.
pub struct Serve {
    pub child: Child,
    pub address: SocketAddr,
    pub log: Arc<Mutex<Vec<String>>>,
}

/// Starts `idspace-serve` against `url` with `extra` flags; waits until it listens.
pub fn serve(url: &str, extra: &[&str]) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_idspace-serve"))
        .args(["--url", url, "--workers", "2"])
        .args(extra)
        .args(if extra.contains(&"--listen") {
            &[][..]
        } else {
            &["--listen", "127.0.0.1:0"][..]
        })
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("idspace-serve starts");
    let stderr = child.stderr.take().expect("piped");
    let log = Arc::new(Mutex::new(Vec::new()));
    let (sender, lines): (_, Receiver<String>) = mpsc::channel();
    {
        let log = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[serve] {line}");
                log.lock().unwrap().push(line.clone());
                let _ = sender.send(line);
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let address = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("idspace-serve did not say where it listens");
        };
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split(' ').next().unwrap().parse().expect("an address");
        }
    };
    Serve {
        child,
        address,
        log,
    }
}

impl Serve {
    /// Sends a signal to the process.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill with our child's PID (not yet reaped) and a valid signal.
        let status = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(status, 0, "kill({signal})");
    }

    /// Waits for the process to exit, at most `limit`; its exit code.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("idspace-serve did not exit within {limit:?}");
    }

    /// Whether a log line contains `text`.
    pub fn logged(&self, text: &str) -> bool {
        self.log
            .lock()
            .unwrap()
            .iter()
            .any(|line| line.contains(text))
    }

    /// Whether a log line contains `text` within `limit` (a line the process writes after work
    /// of its own, such as starting a space's node, may come after the request that caused
    /// it was answered).
    pub fn logged_within(&self, text: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.logged(text) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// A client of this process.
    pub fn client(&self) -> Client {
        Client::connect(self.address)
    }
}

impl Serve {
    /// Stops the process gracefully (SIGTERM) and waits for it, at most 15 s; its exit code.
    pub fn stop(&mut self) -> Option<i32> {
        self.signal(libc::SIGTERM);
        self.wait(Duration::from_secs(15))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response: status, headers (names lowercase), body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `error` code of a JSON error body.
    pub fn code(&self) -> String {
        let value: serde_json::Value = serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("a JSON body: {}", self.text()));
        value["error"].as_str().expect("an error code").to_string()
    }
}

/// A keep-alive HTTP/1.1 connection.
pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(address: SocketAddr) -> Client {
        Client::try_connect(address).expect("connects")
    }

    pub fn try_connect(address: SocketAddr) -> Option<Client> {
        let stream = TcpStream::connect(address).ok()?;
        stream.set_nodelay(true).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        Some(Client {
            reader: BufReader::new(stream),
        })
    }

    /// Sends raw bytes and reads one response (`None` if the server closed instead).
    pub fn raw(&mut self, request: &[u8]) -> Option<Response> {
        self.reader.get_mut().write_all(request).ok()?;
        self.read_response()
    }

    /// `GET path` with extra header lines.
    pub fn get(&mut self, path: &str, headers: &str) -> Response {
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n{headers}\r\n");
        self.raw(request.as_bytes()).expect("a response")
    }

    /// `POST path` with a body and extra header lines.
    pub fn post(&mut self, path: &str, headers: &str, body: &str) -> Response {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n{headers}\r\n{body}",
            body.len()
        );
        self.raw(request.as_bytes()).expect("a response")
    }

    fn read_response(&mut self) -> Option<Response> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let status = line.split(' ').nth(1)?.parse().ok()?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).ok()?;
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            let (name, value) = trimmed.split_once(':')?;
            headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse().unwrap_or(0));
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).ok()?;
        Some(Response {
            status,
            headers,
            body,
        })
    }
}

/// IDs seen more than once.
pub fn duplicates(ids: &[u64]) -> usize {
    let mut seen = HashSet::with_capacity(ids.len());
    ids.iter().filter(|id| !seen.insert(**id)).count()
}

/// IDs of the space leased, never issued and not parked for a node's next start (the
/// gaps), given the IDs issued.
pub fn gaps(url: &str, name: &str, issued: usize) -> u64 {
    let mut store = Store::connect(url).expect("connects");
    let info = store.space(name).expect("space");
    let leased = info.leased_through.map_or(0, |last| last + 1 - info.min);
    let parked: i64 = store
        .client()
        .query_one(
            "SELECT coalesce(sum(last_id - first_id + 1), 0)::bigint FROM idspace_parked \
             WHERE space = $1",
            &[&name],
        )
        .expect("parked")
        .get(0);
    leased.saturating_sub(issued as u64 + parked as u64)
}

/// Asks `GET /v1/spaces/{space}/ids?count=N` on `client` until `until` says stop, collecting
/// the IDs and counting the refusals (by status).
pub fn hammer(
    address: SocketAddr,
    space: &str,
    count: usize,
    until: &dyn Fn() -> bool,
) -> (Vec<u64>, Vec<u16>) {
    let mut client = Client::connect(address);
    let (mut ids, mut refused) = (Vec::new(), Vec::new());
    while !until() {
        let path = format!("/v1/spaces/{space}/ids?count={count}");
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
        match client.raw(request.as_bytes()) {
            Some(response) if response.status == 200 => {
                ids.extend(
                    response
                        .text()
                        .lines()
                        .map(|l| l.parse::<u64>().expect("an ID")),
                );
            }
            Some(response) => {
                refused.push(response.status);
                std::thread::sleep(Duration::from_millis(20));
            }
            // The node went away (killed, stopped): reconnect, it may be back.
            None => {
                refused.push(0);
                std::thread::sleep(Duration::from_millis(50));
                if let Some(again) = Client::try_connect(address) {
                    client = again;
                }
            }
        }
    }
    (ids, refused)
}
