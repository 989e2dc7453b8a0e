//! An HTTP/1.1 hello-world server: hyper on the runtime's workers, pollers and timers.
//!
//! `cargo run -p idspace --features hyper --example http_hello -- [ADDR]` listens on ADDR
//! (default `127.0.0.1:8080`), prints `listening on ADDR` once bound, answers `GET /` with
//! `hello` over keep-alive connections (404 for other paths), and stops on SIGINT or SIGTERM,
//! exiting 0. The signals reach the accept loop through a socket pair that signal-hook writes
//! a byte into (the self-pipe trick), registered with the runtime like any socket.

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::io::Write;
use std::process::ExitCode;
use std::task::Poll;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use idspace::hyper_rt::{HyperIo, HyperTimer};
use idspace::net::{TcpListener, TcpStream, UnixStream};
use idspace::sched::{spawn, Builder};

fn main() -> ExitCode {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_string());
    let runtime = match Builder::new().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("http_hello: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(&addr)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("http_hello: {addr}: {error}");
            ExitCode::FAILURE
        }
        Err(panic) => {
            eprintln!("http_hello: {panic}");
            ExitCode::FAILURE
        }
    }
}

/// Serves until SIGINT or SIGTERM.
async fn serve(addr: &str) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    let stop = stop_signals()?;
    println!("listening on {}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let timer = HyperTimer::current().map_err(std::io::Error::other)?;
    loop {
        let mut accept = std::pin::pin!(listener.accept());
        let mut byte = [0; 1];
        // Whichever comes first: a signal's byte (or the pair's end), or a connection.
        let next = poll_fn(|cx| {
            if stop.poll_read(cx, &mut byte).is_ready() {
                return Poll::Ready(None);
            }
            accept.as_mut().poll(cx).map(Some)
        })
        .await;
        match next {
            None => return Ok(()),
            Some(Ok((stream, _peer))) => {
                spawn(connection(stream, timer.clone())).map_err(std::io::Error::other)?;
            }
            // Out-of-descriptor errors never get here (accept backs off); others end the server.
            Some(Err(error)) => return Err(error),
        }
    }
}

/// A socket that becomes readable when SIGINT or SIGTERM arrives.
fn stop_signals() -> std::io::Result<UnixStream> {
    let (read, write) = std::os::unix::net::UnixStream::pair()?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::low_level::pipe::register(signal, write.try_clone()?)?;
    }
    UnixStream::from_std(read)
}

/// One keep-alive connection.
async fn connection(stream: TcpStream, timer: HyperTimer) {
    // Responses are small and the next request waits for them: no Nagle delay.
    let _ = stream.set_nodelay(true);
    let served = http1::Builder::new()
        .timer(timer)
        .keep_alive(true)
        .serve_connection(HyperIo::new(stream), service_fn(hello))
        .await;
    if let Err(error) = served {
        // A client that resets its connection is not the server's problem.
        if !error.is_incomplete_message() {
            eprintln!("http_hello: connection: {error}");
        }
    }
}

async fn hello(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = if request.method() == Method::GET && request.uri().path() == "/" {
        Response::new(Full::new(Bytes::from_static(b"hello")))
    } else {
        let mut missing = Response::new(Full::new(Bytes::from_static(b"not found")));
        *missing.status_mut() = StatusCode::NOT_FOUND;
        missing
    };
    Ok(response)
}
