//! The accept loop outlives running out of descriptors: with `RLIMIT_NOFILE` lowered so that
//! no descriptor can be opened, `accept` gets `EMFILE`, logs it and backs off instead of
//! failing; once descriptors are available again, the waiting connection is accepted.
//!
//! The only test of its binary: the lowered limit would break tests running beside it.

#![cfg(feature = "std")]

use std::time::{Duration, Instant};

use idspace::net::TcpListener;

mod io_util;
use io_util::{runtime, LIMIT};

/// Restores the descriptor limit when dropped, also when the test fails.
struct Restore(libc::rlimit);

impl Drop for Restore {
    fn drop(&mut self) {
        // SAFETY: setrlimit with a valid `rlimit` (the one read before lowering it).
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.0) };
    }
}

fn limit() -> libc::rlimit {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the valid `rlimit` we pass.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    limit
}

/// The lowest descriptor number not in use: the one the next open would get. With the limit
/// at it, no open succeeds. Probed with `fcntl`, which opens nothing itself.
fn lowest_free_fd() -> u64 {
    (0..)
        // SAFETY: F_GETFD only reads the descriptor's flags; a closed number fails with EBADF.
        .find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1)
        .expect("a free number") as u64
}

#[test]
fn accept_backs_off_on_emfile_and_accepts_once_descriptors_are_back() {
    let runtime = runtime(2);
    let (listener, addr) = runtime
        .block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            let addr = listener.local_addr()?;
            Ok::<_, std::io::Error>((listener, addr))
        })
        .expect("block_on ran")
        .expect("bound");
    // The connection waits in the backlog; its descriptor is opened before the limit drops.
    let client = std::net::TcpStream::connect(addr).expect("connects");
    let saved = limit();
    let restore = Restore(saved);
    let lowered = libc::rlimit {
        rlim_cur: lowest_free_fd(),
        rlim_max: saved.rlim_max,
    };
    // SAFETY: setrlimit with a valid `rlimit`; `restore` puts the old one back.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lowered) }, 0);
    let accepted = runtime.spawn(async move {
        let (stream, peer) = listener.accept().await?;
        Ok::<_, std::io::Error>((stream.peer_addr()?, peer))
    });
    // Out of descriptors, the accept keeps retrying rather than failing.
    std::thread::sleep(Duration::from_millis(50));
    if accepted.is_finished() {
        let outcome = accepted.join().map(|accepted| accepted.map(|_| ()));
        panic!("accept must wait out EMFILE, not return: {outcome:?}");
    }
    drop(restore);
    let deadline = Instant::now() + LIMIT;
    while !accepted.is_finished() {
        assert!(
            Instant::now() < deadline,
            "never accepted after the limit was restored"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let (peer, reported) = accepted.join().expect("ran").expect("accepted");
    assert_eq!(peer, client.local_addr().expect("bound"));
    assert_eq!(peer, reported);
}
