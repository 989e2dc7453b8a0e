//! The runtime's sockets and pipes at work: TCP, Unix stream and datagram sockets, UDP and
//! pipes move bytes between tasks on different workers, through both the types' own futures
//! and the `futures-io` traits; creation outside a runtime is refused with a clear error.

#![cfg(feature = "std")]

use std::future::poll_fn;
use std::io;
use std::pin::Pin;

use futures_io::{AsyncRead, AsyncWrite};
use idspace::net::{socketpair, TcpListener, TcpStream, UdpSocket, UnixDatagram};
use idspace::pipe::pipe;
use idspace::sched::{spawn, Poller};

mod io_util;
use io_util::{run, runtime, runtime_with};

/// Reads through the `AsyncRead` trait until the end of the stream.
async fn read_to_end(mut reader: impl AsyncRead + Unpin) -> io::Result<Vec<u8>> {
    let mut all = Vec::new();
    let mut buf = [0; 1024];
    loop {
        let n = poll_fn(|cx| Pin::new(&mut reader).poll_read(cx, &mut buf)).await?;
        if n == 0 {
            return Ok(all);
        }
        all.extend_from_slice(&buf[..n]);
    }
}

/// Writes everything through the `AsyncWrite` trait, then closes the writing side.
async fn write_and_close(mut writer: impl AsyncWrite + Unpin, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut writer).poll_write(cx, data)).await?;
        data = &data[n..];
    }
    poll_fn(|cx| Pin::new(&mut writer).poll_close(cx)).await
}

#[test]
fn tcp_moves_a_megabyte_each_way_through_the_futures_io_traits() {
    let runtime = runtime(2);
    let data: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    let expected = data.clone();
    let (echoed, received) = run(&runtime, "tcp echo", async move {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        // The server echoes everything, from a reader task to a writer task.
        let server = spawn(async move {
            let (stream, peer) = listener.accept().await?;
            assert_eq!(peer, stream.peer_addr()?);
            let (reader, writer) = stream.into_split();
            let got = read_to_end(reader).await?;
            write_and_close(writer, &got).await?;
            Ok::<_, io::Error>(got.len())
        })
        .expect("in the runtime");
        let mut client = TcpStream::connect(addr).await?;
        client.set_nodelay(true)?;
        assert!(client.nodelay()?);
        let (reader, writer) = client.split();
        let sent = write_and_close(writer, &data);
        // Send and receive at once: a megabyte overflows the socket buffers both ways.
        let (sent, back) = join(sent, read_to_end(reader)).await;
        sent?;
        let echoed = server.await.expect("server ran")?;
        Ok::<_, io::Error>((echoed, back?))
    })
    .expect("no I/O error");
    assert_eq!(echoed, expected.len());
    assert!(received == expected, "the echo came back intact");
    assert_eq!(
        runtime.handle().io_sources(),
        0,
        "every socket deregistered"
    );
}

/// Polls both futures until both are done (no helper crate needed for two).
async fn join<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    let (mut a, mut b) = (Box::pin(a), Box::pin(b));
    let (mut ra, mut rb) = (None, None);
    poll_fn(|cx| {
        if ra.is_none() {
            ra = a.as_mut().poll(cx).map(Some).pending_none();
        }
        if rb.is_none() {
            rb = b.as_mut().poll(cx).map(Some).pending_none();
        }
        if ra.is_some() && rb.is_some() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    (ra.expect("done"), rb.expect("done"))
}

trait PendingNone<T> {
    fn pending_none(self) -> Option<T>;
}

impl<T> PendingNone<T> for std::task::Poll<Option<T>> {
    fn pending_none(self) -> Option<T> {
        match self {
            std::task::Poll::Ready(value) => value,
            std::task::Poll::Pending => None,
        }
    }
}

#[test]
fn socketpairs_and_pipes_carry_messages_between_tasks_on_other_workers() {
    for poller in Poller::ALL {
        ping_pong(poller);
    }
}

fn ping_pong(poller: Poller) {
    let runtime = runtime_with(2, poller);
    let rounds = 2000u32;
    let total = run(&runtime, "ping-pong", async move {
        // A counter bounces through a socketpair one way and a pipe the other way.
        let (here, there) = socketpair()?;
        let (back_sender, back_receiver) = pipe()?;
        let peer = spawn(async move {
            let mut buf = [0; 4];
            for _ in 0..rounds {
                there.read_exact(&mut buf).await?;
                let next = u32::from_le_bytes(buf) + 1;
                back_sender.write_all(&next.to_le_bytes()).await?;
            }
            Ok::<_, io::Error>(())
        })
        .expect("in the runtime");
        let mut counter = 0u32;
        let mut buf = [0; 4];
        for _ in 0..rounds {
            here.write_all(&counter.to_le_bytes()).await?;
            back_receiver.read_exact(&mut buf).await?;
            counter = u32::from_le_bytes(buf);
        }
        peer.await.expect("peer ran")?;
        Ok::<_, io::Error>(counter)
    })
    .expect("no I/O error");
    assert_eq!(total, rounds);
    let stats = runtime.stats();
    assert!(
        stats.io_events > 0,
        "the {poller} poller delivered the readiness: {stats:?}"
    );
    assert_eq!(runtime.handle().io_sources(), 0);
}

/// hackbench's shape in small: twenty senders share one socket and write to it at once, one
/// receiver reads everything. With one waker slot per direction, a waiting sender pushed out
/// by another would never be woken, and this would hang.
#[test]
fn many_writers_waiting_on_one_socket_are_all_woken() {
    for poller in Poller::ALL {
        many_writers(poller);
    }
}

fn many_writers(poller: Poller) {
    const SENDERS: usize = 20;
    const MESSAGES: usize = 200;
    const SIZE: usize = 100;
    let runtime = runtime_with(2, poller);
    let received = run(&runtime, "shared socket", async {
        let (receiver, shared) = socketpair()?;
        let shared = std::sync::Arc::new(shared);
        let senders: Vec<_> = (0..SENDERS)
            .map(|_| {
                let shared = std::sync::Arc::clone(&shared);
                spawn(async move {
                    for _ in 0..MESSAGES {
                        shared.write_all(&[1; SIZE]).await?;
                    }
                    Ok::<_, io::Error>(())
                })
                .expect("in the runtime")
            })
            .collect();
        drop(shared);
        // Everything, then the end of the stream once every sender's handle is dropped.
        let received = read_to_end(&receiver).await?;
        for sender in senders {
            sender.await.expect("sender ran")?;
        }
        Ok::<_, io::Error>(received.len())
    })
    .expect("no I/O error");
    assert_eq!(received, SENDERS * MESSAGES * SIZE, "{poller} poller");
}

/// With one shared poller every resource is registered with it, counted once, whichever
/// thread creates it.
#[test]
fn a_shared_poller_counts_every_resource_once() {
    let runtime = runtime_with(3, Poller::Shared);
    assert_eq!(runtime.handle().poller(), Poller::Shared);
    let pair = runtime.block_on(async { socketpair() }).unwrap().unwrap();
    let pipe = run(&runtime, "a pipe on a worker", async { pipe() }).unwrap();
    assert_eq!(runtime.handle().io_sources(), 4);
    drop((pair, pipe));
    assert_eq!(runtime.handle().io_sources(), 0);
}

#[test]
fn datagrams_keep_their_boundaries() {
    let runtime = runtime(2);
    run(&runtime, "datagrams", async {
        let (a, b) = UnixDatagram::pair()?;
        let udp_a = UdpSocket::bind("127.0.0.1:0")?;
        let udp_b = UdpSocket::bind("127.0.0.1:0")?;
        udp_a.connect(udp_b.local_addr()?)?;
        let reader = spawn(async move {
            let mut buf = [0; 64];
            let mut seen = Vec::new();
            for _ in 0..3 {
                let n = b.recv(&mut buf).await?;
                seen.push(buf[..n].to_vec());
            }
            let (n, from) = udp_b.recv_from(&mut buf).await?;
            seen.push(buf[..n].to_vec());
            Ok::<_, io::Error>((seen, from))
        })
        .expect("in the runtime");
        for message in [&b"a"[..], b"bb", b"ccc"] {
            a.send(message).await?;
        }
        udp_a.send(b"udp").await?;
        let (seen, from) = reader.await.expect("reader ran")?;
        assert_eq!(seen, [&b"a"[..], b"bb", b"ccc", b"udp"]);
        assert_eq!(from, udp_a.local_addr()?);
        Ok::<_, io::Error>(())
    })
    .expect("no I/O error");
}

#[test]
fn sockets_made_outside_a_runtime_are_refused_with_a_clear_error() {
    let error = socketpair().expect_err("no runtime here");
    assert!(
        error.to_string().contains("no runtime here"),
        "the error says what is wrong: {error}"
    );
    assert!(TcpListener::bind("127.0.0.1:0").is_err());
    assert!(pipe().is_err());
}
