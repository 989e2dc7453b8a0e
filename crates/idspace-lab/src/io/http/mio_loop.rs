//! The practical limit: one thread, one `mio` poll, no runtime and no tasks. Each request is
//! parsed with `httparse` (hyper's own parser) and answered with the bytes hyper sends for the
//! same service, `date` header included, so that the servers differ only in what runs between
//! the socket and the answer.
//!
//! Connections live in a slab indexed by their token; readiness is edge-triggered, so a
//! connection is served until a read or a write would block: it reads only while nothing is
//! waiting to be written (a client that does not read its answers stops being read), and the
//! next edge of whichever side blocked resumes it. Requests with a body are refused (400, then
//! close): the service answers `GET` only, and the load is wrk's.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

const LISTENER: Token = Token(0);
const STOP: Token = Token(1);
/// Connection `i` has token `FIRST + i`.
const FIRST: usize = 2;

/// The loop, running on its own thread.
pub(crate) struct MioServer {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<io::Result<()>>,
}

impl MioServer {
    /// Serves `listener` on a new thread (which inherits the caller's CPU affinity).
    pub(crate) fn start(listener: std::net::TcpListener) -> io::Result<MioServer> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), STOP)?);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("mio-loop".into())
            .spawn(move || serve(poll, listener, &stopping))?;
        Ok(MioServer {
            waker,
            stop,
            thread,
        })
    }

    /// Stops the loop and closes its connections; the error that ended it early, if one did.
    pub(crate) fn stop(self) -> Result<(), String> {
        // Release: pairs with the loop's Acquire load after the waker's event.
        self.stop.store(true, Ordering::Release);
        self.waker
            .wake()
            .map_err(|e| format!("mio loop: wake: {e}"))?;
        match self.thread.join() {
            Ok(result) => result.map_err(|e| format!("mio loop: {e}")),
            Err(_) => Err("mio loop: the thread panicked".into()),
        }
    }
}

/// The event loop, until `stop`.
fn serve(mut poll: Poll, listener: TcpListener, stop: &AtomicBool) -> io::Result<()> {
    let mut events = Events::with_capacity(1024);
    let mut connections = Slab::default();
    let mut answers = Answers::new();
    loop {
        if let Err(error) = poll.poll(&mut events, None) {
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        answers.refresh();
        for event in events.iter() {
            match event.token() {
                LISTENER => accept(&listener, &poll, &mut connections)?,
                // Acquire: pairs with `MioServer::stop`'s Release store.
                STOP if stop.load(Ordering::Acquire) => return Ok(()),
                STOP => {}
                Token(token) => {
                    let index = token - FIRST;
                    let done = connections
                        .get(index)
                        .is_some_and(|c| c.serve(&answers).is_err());
                    if done {
                        if let Some(mut connection) = connections.remove(index) {
                            let _ = poll.registry().deregister(&mut connection.stream);
                        }
                    }
                }
            }
        }
    }
}

/// Accepts until the backlog is empty.
fn accept(listener: &TcpListener, poll: &Poll, connections: &mut Slab) -> io::Result<()> {
    loop {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nodelay(true)?;
                let index = connections.vacant();
                let interest = Interest::READABLE | Interest::WRITABLE;
                poll.registry()
                    .register(&mut stream, Token(FIRST + index), interest)?;
                connections.insert(index, Connection::new(stream));
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            // A connection that went away before it was accepted, or a full fd table: the
            // listener stays registered and the next connection edge retries.
            Err(_) => return Ok(()),
        }
    }
}

/// The loop's connections, by token.
#[derive(Default)]
struct Slab {
    slots: Vec<Option<Connection>>,
    free: Vec<usize>,
}

impl Slab {
    /// The index the next insert should use.
    fn vacant(&mut self) -> usize {
        self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        })
    }

    fn insert(&mut self, index: usize, connection: Connection) {
        self.slots[index] = Some(connection);
    }

    fn get(&mut self, index: usize) -> Option<&mut Connection> {
        self.slots.get_mut(index).and_then(Option::as_mut)
    }

    fn remove(&mut self, index: usize) -> Option<Connection> {
        let connection = self.slots.get_mut(index)?.take();
        if connection.is_some() {
            self.free.push(index);
        }
        connection
    }
}

/// The two answers, with the `date` header of the current second (as hyper caches it).
struct Answers {
    hello: Vec<u8>,
    not_found: Vec<u8>,
    bad: Vec<u8>,
    refreshed: Instant,
}

impl Answers {
    fn new() -> Answers {
        let mut answers = Answers {
            hello: Vec::new(),
            not_found: Vec::new(),
            bad: Vec::new(),
            refreshed: Instant::now(),
        };
        answers.render();
        answers
    }

    fn refresh(&mut self) {
        if self.refreshed.elapsed().as_secs() >= 1 {
            self.render();
        }
    }

    fn render(&mut self) {
        let date = httpdate::fmt_http_date(SystemTime::now());
        let answer = |status: &str, body: &str| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\ndate: {date}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        };
        self.hello = answer("200 OK", "hello");
        self.not_found = answer("404 Not Found", "");
        self.bad = answer("400 Bad Request", "");
        self.refreshed = Instant::now();
    }
}

/// What a parsed request gets.
enum Verdict {
    /// An answer; then close the connection if `close`.
    Answer { hello: bool, close: bool },
    /// A request this loop does not serve: 400, then close.
    Refuse,
}

struct Connection {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
    /// The client asked to close after the answers written so far.
    closing: bool,
}

/// Why a connection is closed: the peer finished, failed, or asked to.
struct Closed;

impl Connection {
    fn new(stream: TcpStream) -> Connection {
        Connection {
            stream,
            input: Vec::with_capacity(4096),
            output: Vec::with_capacity(4096),
            closing: false,
        }
    }

    /// Writes, reads and answers until a side would block; `Err` when the connection is done.
    fn serve(&mut self, answers: &Answers) -> Result<(), Closed> {
        let mut chunk = [0u8; 8192];
        loop {
            if !self.flush()? {
                return Ok(());
            }
            if self.closing {
                return Err(Closed);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(Closed),
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Closed),
            }
            self.answer(answers);
        }
    }

    /// Writes what is pending; true once all of it is written, false if the socket is full.
    fn flush(&mut self) -> Result<bool, Closed> {
        let mut written = 0;
        let result = loop {
            if written == self.output.len() {
                break Ok(true);
            }
            match self.stream.write(&self.output[written..]) {
                Ok(0) => break Err(Closed),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break Err(Closed),
            }
        };
        self.output.drain(..written);
        result
    }

    /// Answers every complete request in the input (pipelined ones included).
    fn answer(&mut self, answers: &Answers) {
        let mut start = 0;
        while !self.closing {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut request = httparse::Request::new(&mut headers);
            let verdict = match request.parse(&self.input[start..]) {
                Ok(httparse::Status::Complete(length)) => {
                    start += length;
                    judge(&request)
                }
                Ok(httparse::Status::Partial) => break,
                Err(_) => Verdict::Refuse,
            };
            match verdict {
                Verdict::Answer { hello, close } => {
                    let answer = if hello {
                        &answers.hello
                    } else {
                        &answers.not_found
                    };
                    self.output.extend_from_slice(answer);
                    self.closing = close;
                }
                Verdict::Refuse => {
                    self.output.extend_from_slice(&answers.bad);
                    self.closing = true;
                }
            }
        }
        self.input.drain(..start);
    }
}

/// What `request` gets: `hello` for `GET /`, 404 for other paths, a refusal for a body.
fn judge(request: &httparse::Request) -> Verdict {
    let mut close = request.version == Some(0);
    for header in request.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") && header.value != b"0"
            || name.eq_ignore_ascii_case("transfer-encoding")
        {
            return Verdict::Refuse;
        }
        if name.eq_ignore_ascii_case("connection") {
            close = header.value.eq_ignore_ascii_case(b"close")
                || (close && !header.value.eq_ignore_ascii_case(b"keep-alive"));
        }
    }
    Verdict::Answer {
        hello: request.method == Some("GET") && request.path == Some("/"),
        close,
    }
}

/// The address a server bound for the lab listens on: a fresh loopback port, bound through
/// mio (whose backlog, 1024, is tokio's too) and handed over as a std listener.
pub(crate) fn bind() -> Result<(std::net::TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .map_err(|e| format!("cannot listen on the loopback: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("local_addr: {e}"))?;
    Ok((listener.into(), addr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Sends `requests` on a new connection and reads until the server closes it.
    fn exchange(addr: SocketAddr, requests: &str) -> String {
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client.write_all(requests.as_bytes()).unwrap();
        let mut answers = String::new();
        client.read_to_string(&mut answers).unwrap();
        answers
    }

    #[test]
    fn answers_pipelined_requests_and_refuses_bodies() {
        let (listener, addr) = bind().unwrap();
        let server = MioServer::start(listener).unwrap();
        let get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let other = "GET /other HTTP/1.1\r\nHost: x\r\n\r\n";
        let last = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        let answers = exchange(addr, &format!("{get}{other}{get}{last}"));
        assert_eq!(
            answers.matches("HTTP/1.1 200 OK\r\n").count(),
            3,
            "{answers}"
        );
        assert_eq!(answers.matches("HTTP/1.1 404 Not Found\r\n").count(), 1);
        assert_eq!(answers.matches("\r\n\r\nhello").count(), 3);
        assert!(answers.ends_with("hello"), "{answers}");
        let refused = exchange(
            addr,
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        );
        assert!(refused.starts_with("HTTP/1.1 400 Bad Request"), "{refused}");
        let garbage = exchange(addr, "NOT HTTP\0\r\n\r\n");
        assert!(garbage.starts_with("HTTP/1.1 400 Bad Request"), "{garbage}");
        server.stop().unwrap();
    }
}
