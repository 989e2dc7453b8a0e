//! hyper on the runtime: a client and a server talking HTTP/1.1 over our sockets, and the
//! `http_hello` example served, queried and stopped with SIGTERM.

#![cfg(feature = "std")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use idspace::hyper_rt::{HyperExecutor, HyperIo, HyperTimer};
use idspace::net::{TcpListener, TcpStream};
use idspace::sched::spawn;

mod io_util;
use io_util::{run, runtime};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[test]
fn a_hyper_client_and_server_round_trip_on_keep_alive() {
    let runtime = runtime(2);
    let bodies = run(&runtime, "hyper round trip", async {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let timer = HyperTimer::current()?;
        let server = spawn(async move {
            let (stream, _) = listener.accept().await?;
            let echo = hyper::service::service_fn(|request: Request<Incoming>| async move {
                let path = request.uri().path().to_string();
                let body = request.into_body().collect().await?.to_bytes();
                let reply = format!("{path}:{}", String::from_utf8_lossy(&body));
                Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from(reply))))
            });
            hyper::server::conn::http1::Builder::new()
                .timer(timer)
                .serve_connection(HyperIo::new(stream), echo)
                .await?;
            Ok::<_, BoxError>(())
        })?;
        let stream = TcpStream::connect(addr).await?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(HyperIo::new(stream)).await?;
        // The connection's driver runs as a task of its own, spawned through the executor.
        hyper::rt::Executor::execute(&HyperExecutor::current()?, async move {
            let _ = connection.await;
        });
        let mut bodies = Vec::new();
        for n in 0..20 {
            let request = Request::post(format!("/n{n}"))
                .body(Full::new(Bytes::from("x".repeat(n * 1000))))?;
            let response = sender.send_request(request).await?;
            assert!(response.status().is_success());
            bodies.push(response.into_body().collect().await?.to_bytes());
        }
        drop(sender); // the server's connection ends with the client's
        server.await.map_err(|error| error.to_string())??;
        Ok::<_, BoxError>(bodies)
    })
    .expect("the exchange succeeded");
    assert_eq!(bodies.len(), 20);
    for (n, body) in bodies.iter().enumerate() {
        assert_eq!(body, &format!("/n{n}:{}", "x".repeat(n * 1000)));
    }
    assert_eq!(runtime.handle().io_sources(), 0);
}

/// One read of `io` into a buffer of 64 bytes, as hyper makes it: the bytes read.
async fn read_some(io: &mut HyperIo<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut storage = [std::mem::MaybeUninit::<u8>::uninit(); 64];
    let mut buf = hyper::rt::ReadBuf::uninit(&mut storage);
    std::future::poll_fn(|cx| {
        hyper::rt::Read::poll_read(std::pin::Pin::new(&mut *io), cx, buf.unfilled())
    })
    .await?;
    Ok(buf.filled().to_vec())
}

/// A read that returns fewer bytes than asked clears the stream's readiness; bytes that come
/// later still wake the reader, and an end of stream that comes with bytes is still seen.
#[test]
fn after_a_short_read_later_bytes_and_the_end_of_stream_still_arrive() {
    let runtime = runtime(2);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut peer, _) = listener.accept().unwrap();
        peer.write_all(b"abc").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        peer.write_all(b"def").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        peer.write_all(b"gh").unwrap();
        peer.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let reads = run(&runtime, "short reads", async move {
        let mut io = HyperIo::new(TcpStream::connect(addr).await?);
        let mut reads = Vec::new();
        loop {
            let read = read_some(&mut io).await?;
            if read.is_empty() {
                return Ok::<_, BoxError>(reads);
            }
            reads.push(read);
        }
    })
    .expect("every read completed");
    peer.join().unwrap();
    assert_eq!(reads.concat(), b"abcdefgh");
}

/// The example's binary: built by `cargo test` with the other examples, or built here when
/// this test runs alone.
fn example_binary() -> PathBuf {
    let deps = std::env::current_exe().expect("the test's path");
    let profile = deps
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/PROFILE/deps/TEST");
    let binary = profile.join("examples").join("http_hello");
    if !binary.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args([
            "build",
            "-p",
            "idspace",
            "--features",
            "hyper",
            "--example",
            "http_hello",
        ]);
        if profile.file_name().is_some_and(|name| name == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("cargo runs");
        assert!(status.success(), "building the example failed");
    }
    binary
}

/// Kills the child if the test fails before it is reaped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One `GET path` on a keep-alive connection; returns the status line and the body.
fn get(stream: &mut std::net::TcpStream, path: &str) -> (String, String) {
    write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").expect("request sent");
    let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header");
        if line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().expect("a length");
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("body");
    (
        status.trim().to_string(),
        String::from_utf8(body).expect("text"),
    )
}

#[test]
fn the_http_hello_example_serves_keep_alive_and_exits_0_on_sigterm() {
    let binary = example_binary();
    let child = Command::new(&binary)
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the example starts");
    let mut child = Reaped(child);
    let mut stdout = BufReader::new(child.0.stdout.take().expect("piped"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("its first line");
    let addr: SocketAddr = line
        .strip_prefix("listening on ")
        .and_then(|addr| addr.trim().parse().ok())
        .unwrap_or_else(|| panic!("not a listening line: {line:?}"));
    let mut stream = std::net::TcpStream::connect(addr).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    for _ in 0..5 {
        let (status, body) = get(&mut stream, "/");
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 200 OK", "hello")
        );
    }
    let (status, _) = get(&mut stream, "/missing");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    // SAFETY: kill(2) with the child's PID, which this test owns and has not reaped.
    let sent = unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0, "SIGTERM sent");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("waitable") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0), "a clean exit");
}
