//! Faults on the runtime's sockets, each with a clear outcome and no hang: a reset
//! connection, a half-closed peer, a peer that never reads (backpressure), cancelled reads and
//! writes, and sockets that outlive their runtime.

#![cfg(feature = "std")]

use std::future::{poll_fn, Future};
use std::io::{self, Write};
use std::net::Shutdown;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use idspace::net::{socketpair, TcpListener, TcpStream};
use idspace::sched::spawn;
use idspace::sched::time::timeout;

mod io_util;
use io_util::{run, runtime, LIMIT};

/// Polls `future` once: its output, or `None` if it is pending (the future is then dropped:
/// a cancellation).
async fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    match poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await {
        Poll::Ready(value) => Some(value),
        Poll::Pending => None,
    }
}

#[test]
fn a_reset_connection_fails_reads_and_writes_with_the_reset() {
    let runtime = runtime(2);
    let listener_addr = std::sync::mpsc::channel();
    let (addr_tx, addr_rx) = listener_addr;
    let server = runtime.spawn(async move {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        addr_tx
            .send(listener.local_addr()?)
            .expect("the test waits");
        let (stream, _) = listener.accept().await?;
        let mut buf = [0; 64];
        // The peer's data first, then its reset.
        let mut outcome = Ok(0);
        for _ in 0..8 {
            outcome = stream.read(&mut buf).await;
            if !matches!(outcome, Ok(n) if n > 0) {
                break;
            }
        }
        let written = async {
            for _ in 0..8 {
                stream.write(&[0; 1024]).await?;
            }
            Ok::<_, io::Error>(())
        };
        Ok::<_, io::Error>((outcome, written.await))
    });
    let addr = addr_rx.recv_timeout(LIMIT).expect("the server bound");
    let mut client = std::net::TcpStream::connect(addr).expect("connects");
    client.write_all(b"before the reset").expect("sent");
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt on the client's open socket with a correctly sized `linger`: a zero
    // linger makes the close send a reset instead of a FIN.
    let set = unsafe {
        libc::setsockopt(
            client.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "SO_LINGER set");
    std::thread::sleep(Duration::from_millis(20));
    drop(client);
    let deadline = std::time::Instant::now() + LIMIT;
    while !server.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the reset was never seen"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let (read, write) = server.join().expect("ran").expect("bound and accepted");
    // A read sees the reset (or the end, if the data and the reset raced); a write fails.
    match read {
        Err(error) => assert_eq!(error.kind(), io::ErrorKind::ConnectionReset),
        Ok(n) => assert_eq!(n, 0, "the end of the stream"),
    }
    let error = write.expect_err("writing to a reset connection fails");
    assert!(
        matches!(
            error.kind(),
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
        ),
        "{error}"
    );
}

#[test]
fn a_half_closed_peer_still_reads_the_reply() {
    let runtime = runtime(2);
    let reply = run(&runtime, "half close", async {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let client = TcpStream::connect(listener.local_addr()?).await?;
        let (server, _) = listener.accept().await?;
        let server = spawn(async move {
            let mut request = Vec::new();
            let mut buf = [0; 16];
            loop {
                match server.read(&mut buf).await? {
                    0 => break, // the client's FIN
                    n => request.extend_from_slice(&buf[..n]),
                }
            }
            // Reading again after the end still says 0, at once.
            assert_eq!(server.read(&mut buf).await?, 0);
            server.write_all(&request.repeat(2)).await?;
            Ok::<_, io::Error>(())
        })
        .expect("in the runtime");
        client.write_all(b"half").await?;
        client.shutdown(Shutdown::Write)?;
        let mut reply = [0; 8];
        client.read_exact(&mut reply).await?;
        server.await.expect("server ran")?;
        Ok::<_, io::Error>(reply)
    })
    .expect("no I/O error");
    assert_eq!(&reply, b"halfhalf");
}

#[test]
fn a_peer_that_never_reads_makes_writes_wait_until_it_does() {
    let runtime = runtime(2);
    run(&runtime, "backpressure", async {
        let (writer, reader) = socketpair()?;
        let chunk = [7u8; 4096];
        // Fill the socket buffers: writes complete until one is pending.
        let mut written = 0;
        loop {
            match poll_once(writer.write(&chunk)).await {
                Some(n) => written += n?,
                None => break,
            }
            assert!(written < 64 << 20, "the buffers never filled");
        }
        assert!(written > 0);
        // The dropped (pending) write left the stream usable: a write waits now, and
        // completes once the peer drains what was written.
        let drain = spawn(async move {
            let mut buf = vec![0; 65536];
            let mut total = 0;
            while total < written + chunk.len() {
                total += reader.read(&mut buf).await?;
            }
            Ok::<_, io::Error>(total)
        })
        .expect("in the runtime");
        writer.write_all(&chunk).await?;
        assert_eq!(drain.await.expect("drain ran")?, written + chunk.len());
        Ok::<_, io::Error>(())
    })
    .expect("no I/O error");
}

#[test]
fn a_cancelled_read_loses_nothing() {
    let runtime = runtime(2);
    run(&runtime, "cancelled read", async {
        let (here, there) = socketpair()?;
        let mut buf = [0; 8];
        // Nothing to read: the read times out and is dropped.
        let timed_out = timeout(Duration::from_millis(5), here.read(&mut buf)).await;
        assert!(timed_out.is_err(), "nothing was there to read");
        there.write_all(b"later").await?;
        let n = here.read(&mut buf).await?;
        assert_eq!(&buf[..n], b"later", "the next read gets the data");
        Ok::<_, io::Error>(())
    })
    .expect("no I/O error");
}

#[test]
fn sockets_outliving_their_runtime_fail_instead_of_hanging() {
    let first = runtime(1);
    let (here, there) = first
        .block_on(async { socketpair() })
        .expect("block_on ran")
        .expect("a pair");
    let other = runtime(1);
    // A read pending on another runtime's task when the first runtime shuts down.
    let reader = other.spawn(async move {
        let mut buf = [0; 4];
        here.read(&mut buf).await
    });
    std::thread::sleep(Duration::from_millis(20));
    assert!(!reader.is_finished(), "nothing to read yet");
    drop(first);
    let deadline = std::time::Instant::now() + LIMIT;
    while !reader.is_finished() {
        assert!(std::time::Instant::now() < deadline, "the read hung");
        std::thread::sleep(Duration::from_millis(1));
    }
    let error = reader.join().expect("ran").expect_err("shut down");
    assert!(error.to_string().contains("shut down"), "{error}");
    // Every later operation fails the same way, and dropping the socket is fine.
    let write = other
        .block_on(async move { there.write(b"x").await })
        .expect("block_on ran");
    assert!(write.is_err());
}
