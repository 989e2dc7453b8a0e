//! Thousands of connections opened and closed across all workers: every task finishes, every
//! socket is deregistered, and no descriptor leaks.

#![cfg(feature = "std")]

use std::io;
use std::time::{Duration, Instant};

use idspace::net::{TcpListener, TcpStream};
use idspace::sched::{spawn, Builder, Poller};

mod io_util;
use io_util::{open_fds, LIMIT};

/// Connections in all; clients connect in this many parallel tasks.
const CONNECTIONS: usize = 2000;
const CLIENTS: usize = 8;

/// Both poller shapes, one after the other (the descriptor counts are the process's: the two
/// runs must not overlap).
#[test]
fn thousands_of_connections_leave_no_source_no_descriptor_and_no_task_behind() {
    for poller in Poller::ALL {
        connections_come_and_go(poller);
    }
}

fn connections_come_and_go(poller: Poller) {
    let before = open_fds();
    let mut runtime = Builder::new()
        .workers(4)
        .poller(poller)
        .build()
        .expect("a runtime");
    let with_runtime = open_fds();
    let handle = runtime.handle().clone();
    let echoed = runtime.spawn(async move {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        // The server: a task per connection, echoing 8 bytes.
        let server = spawn(async move {
            let mut served = Vec::with_capacity(CONNECTIONS);
            for _ in 0..CONNECTIONS {
                let (stream, _) = listener.accept().await?;
                served.push(
                    spawn(async move {
                        let mut buf = [0; 8];
                        stream.read_exact(&mut buf).await?;
                        stream.write_all(&buf).await
                    })
                    .expect("in the runtime"),
                );
            }
            for connection in served {
                connection.await.expect("served")?;
            }
            Ok::<_, io::Error>(())
        })
        .expect("in the runtime");
        let clients: Vec<_> = (0..CLIENTS)
            .map(|client| {
                spawn(async move {
                    for n in 0..CONNECTIONS / CLIENTS {
                        let stream = TcpStream::connect(addr).await?;
                        let message = ((client * CONNECTIONS + n) as u64).to_le_bytes();
                        stream.write_all(&message).await?;
                        let mut back = [0; 8];
                        stream.read_exact(&mut back).await?;
                        assert_eq!(back, message);
                    }
                    Ok::<_, io::Error>(())
                })
                .expect("in the runtime")
            })
            .collect();
        for client in clients {
            client.await.expect("client ran")?;
        }
        server.await.expect("server ran")?;
        Ok::<_, io::Error>(CONNECTIONS)
    });
    let deadline = Instant::now() + LIMIT * 3;
    while !echoed.is_finished() {
        assert!(
            Instant::now() < deadline,
            "{poller} poller: stranded: still running, {} sockets registered",
            handle.io_sources()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        echoed.join().expect("ran").expect("no I/O error"),
        CONNECTIONS
    );
    assert_eq!(handle.io_sources(), 0, "every socket deregistered");
    assert_eq!(open_fds(), with_runtime, "no socket descriptor leaked");
    let stats = runtime.stats();
    assert!(stats.io_events > 0, "{stats:?}");
    assert_eq!(runtime.shutdown(), 0, "no task was left to cancel");
    drop(runtime);
    drop(handle);
    assert_eq!(open_fds(), before, "the pollers closed with the runtime");
}
