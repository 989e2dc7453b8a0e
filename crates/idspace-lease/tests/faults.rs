//! Faults against a real PostgreSQL, each asserting that no ID is issued twice, and reporting
//! the gaps: two node processes racing, a node killed mid-lease, a node paused past its
//! lease's expiry (monotonic, and cyclic with a takeover), PostgreSQL stopped and restarted.

mod common;

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{assert_unique, duplicates, node_process, server, space, Line};
use idspace_lease::{LeaseError, Node};

/// The node process of the other tests (run with `LEASE_CHILD_URL` set); without it, nothing
/// to do.
#[test]
fn child_node() {
    let Ok(url) = std::env::var("LEASE_CHILD_URL") else {
        return;
    };
    let var = |name: &str| std::env::var(name).expect(name);
    let number = |name: &str| var(name).parse::<u64>().expect(name);
    // libtest has printed "test child_node ... " without a newline: end that line.
    println!();
    let count = number("LEASE_CHILD_COUNT");
    let threads = number("LEASE_CHILD_THREADS").max(1);
    let node = Node::builder(&url, &var("LEASE_CHILD_SPACE"))
        .ttl(Duration::from_millis(number("LEASE_CHILD_TTL_MS")))
        .step(number("LEASE_CHILD_STEP"), number("LEASE_CHILD_STEP") * 8)
        .start();
    let node = match node {
        Ok(node) => node,
        Err(error) => {
            println!("END err {error}");
            return;
        }
    };
    let out = Mutex::new(std::io::stdout());
    let failed = Mutex::new(None);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut text = String::new();
                let mut issued = 0u64;
                while (count == 0 || issued < count / threads) && !stop.load(Ordering::Relaxed) {
                    match node.next_id() {
                        Ok(id) => text.push_str(&format!("ID {id}\n")),
                        Err(error) => {
                            stop.store(true, Ordering::Relaxed);
                            *failed.lock().unwrap() = Some(error);
                            break;
                        }
                    }
                    issued += 1;
                    if issued % 256 == 0 {
                        let mut out = out.lock().unwrap();
                        let _ = out.write_all(text.as_bytes());
                        let _ = out.flush();
                        text.clear();
                    }
                }
                let mut out = out.lock().unwrap();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            });
        }
    });
    if let Some(error) = failed.into_inner().unwrap() {
        println!("END err {error}");
        return;
    }
    if std::env::var("LEASE_CHILD_HOLD").as_deref() == Ok("1") {
        println!("READY");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        match node.next_id() {
            Ok(id) => println!("ID {id}"),
            Err(error) => println!("END err {error}"),
        }
    }
    println!("END ok");
}

#[test]
fn two_node_processes_race_for_leases() {
    let server = server();
    space(&server, "race", 1, u64::from(u32::MAX), false);
    // Small leases, so that the two processes ask for one every few hundred IDs.
    let a = node_process(&server.url(), "race", 60_000, 2, 10_000, 100, false);
    let b = node_process(&server.url(), "race", 60_000, 2, 10_000, 100, false);
    let mut ids = Vec::new();
    let end_a = a.take(&mut ids, usize::MAX, Duration::from_secs(60));
    let end_b = b.take(&mut ids, usize::MAX, Duration::from_secs(60));
    assert_eq!(end_a.as_deref(), Some("ok"));
    assert_eq!(end_b.as_deref(), Some("ok"));
    assert_eq!(ids.len(), 120_000);
    assert_unique(&server, "race", &ids, "");
}

#[test]
fn a_node_killed_mid_lease_leaves_gaps_never_duplicates() {
    let server = server();
    space(&server, "kill", 1, u64::from(u32::MAX), false);
    let victim = node_process(&server.url(), "kill", 0, 2, 10_000, 1000, false);
    let other = node_process(&server.url(), "kill", 80_000, 2, 10_000, 1000, false);
    let mut ids = Vec::new();
    assert_eq!(victim.take(&mut ids, 20_000, Duration::from_secs(30)), None);
    victim.signal(libc::SIGKILL);
    // The victim's lines still in the pipe are IDs it issued.
    victim.take(&mut ids, usize::MAX, Duration::from_secs(5));
    let end = other.take(&mut ids, usize::MAX, Duration::from_secs(60));
    assert_eq!(end.as_deref(), Some("ok"));
    // A node started after the kill goes on from where the space is, not the victim's lease.
    let node = Node::builder(&server.url(), "kill").start().expect("node");
    ids.extend((0..10_000).map(|i| node.next_id_on(i).expect("id")));
    assert_unique(&server, "kill", &ids, "");
}

#[test]
fn a_node_paused_past_its_lease_expiry_resumes_without_duplicates() {
    let server = server();
    space(&server, "pause", 1, u64::from(u32::MAX), false);
    let paused = node_process(&server.url(), "pause", 60_000, 1, 400, 1000, false);
    let mut ids = Vec::new();
    assert_eq!(paused.take(&mut ids, 10_000, Duration::from_secs(30)), None);
    paused.signal(libc::SIGSTOP);
    // Past the expiry, another node allocates.
    let other = Node::builder(&server.url(), "pause")
        .ttl(Duration::from_millis(400))
        .start()
        .expect("node");
    let started = Instant::now();
    ids.extend((0..20_000).map(|i| other.next_id_on(i).expect("id")));
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(started.elapsed()));
    paused.signal(libc::SIGCONT);
    let end = paused.take(&mut ids, usize::MAX, Duration::from_secs(60));
    assert_eq!(end.as_deref(), Some("ok"));
    assert_unique(&server, "pause", &ids, "");
}

#[test]
fn a_cyclic_lease_taken_over_under_a_paused_node_is_fenced() {
    let server = server();
    // One lease covers the whole space: the second node can only take it over.
    space(&server, "fence", 1, 1000, true);
    let mut paused = node_process(&server.url(), "fence", 10, 1, 300, 1000, true);
    let mut before = Vec::new();
    assert_eq!(
        paused.take(&mut before, usize::MAX, Duration::from_secs(30)),
        None
    );
    assert_eq!(before.len(), 10);
    paused.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(600));
    let taker = Node::builder(&server.url(), "fence")
        .step(1000, 1000)
        .cpus(1)
        .start()
        .expect("takes over the expired lease");
    let taken: Vec<u64> = (0..1000)
        .map(|_| taker.next_id_on(0).expect("id"))
        .collect();
    assert_eq!(duplicates(&taken), 0);
    paused.signal(libc::SIGCONT);
    paused.go_on();
    // The paused node must not serve from the lease it lost.
    let mut after = Vec::new();
    let end = paused.take(&mut after, usize::MAX, Duration::from_secs(30));
    assert!(after.is_empty(), "served {after:?} from a lease taken over");
    let end = end.expect("an answer");
    assert!(end.contains("exhausted"), "{end}");
    let _ = Line::Ready;
}

#[test]
fn postgres_stopped_and_restarted_mid_run() {
    let server = server();
    space(&server, "outage", 1, u64::from(u32::MAX), false);
    // Big leases: allocation goes on from them through the outage.
    let node = Node::builder(&server.url(), "outage")
        .step(200_000, 200_000)
        .start()
        .expect("node");
    // Small leases: run out during the outage.
    let small = Node::builder(&server.url(), "outage")
        .step(100, 100)
        .sub_range(10)
        .cpus(1)
        .start()
        .expect("node");
    let mut ids: Vec<u64> = (0..1000).map(|i| node.next_id_on(i).expect("id")).collect();
    ids.extend((0..50).map(|_| small.next_id_on(0).expect("id")));
    server.stop().expect("stops");
    let during: Vec<u64> = (0..5000)
        .map(|i| node.next_id_on(i).expect("no error while a lease lasts"))
        .collect();
    ids.extend(&during);
    let mut small_during = 0;
    let error = loop {
        match small.next_id_on(0) {
            Ok(id) => {
                ids.push(id);
                small_during += 1;
                assert!(small_during <= 200, "more IDs than the two leases held");
            }
            Err(error) => break error,
        }
    };
    assert!(
        matches!(error, LeaseError::StoreUnreachable(_)),
        "{error:?}"
    );
    // Still down: still an error, never an ID.
    assert!(matches!(
        small.next_id_on(0),
        Err(LeaseError::StoreUnreachable(_))
    ));
    server.start_again().expect("starts");
    let started = Instant::now();
    let resumed = loop {
        match small.next_id_on(0) {
            Ok(id) => break id,
            Err(LeaseError::StoreUnreachable(_)) if started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(error) => panic!("{error:?}"),
        }
    };
    ids.push(resumed);
    ids.extend((0..1000).map(|_| small.next_id_on(0).expect("id")));
    let held_while_down = during.len() + small_during;
    let note = format!(" ({held_while_down} from leases held while down)");
    assert_unique(&server, "outage", &ids, &note);
}

/// PostgreSQL frozen (SIGSTOP: connections accepted, never answered): once the lease's
/// deadline has passed, an allocation fails with `StoreUnreachable` after its bounded wait
/// for a renewal instead of hanging, and succeeds again once the server runs.
#[test]
fn an_allocation_fails_rather_than_hangs_on_a_frozen_server() {
    let server = server();
    space(&server, "frozen", 1, u64::from(u32::MAX), false);
    let node = Node::builder(&server.url(), "frozen")
        .ttl(Duration::from_millis(300))
        .start()
        .expect("node");
    node.next_id().expect("id");
    server.freeze().expect("frozen");
    std::thread::sleep(Duration::from_millis(400));
    let (sender, receiver) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| sender.send(node.next_id()));
        let answer = receiver.recv_timeout(Duration::from_secs(15));
        let waited = started.elapsed();
        server.thaw().expect("thawed");
        let error = answer
            .expect("an answer, not a hang")
            .expect_err("no renewal");
        assert!(
            matches!(error, LeaseError::StoreUnreachable(_)),
            "{error:?}"
        );
        assert!(waited < Duration::from_secs(10), "{waited:?}");
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.next_id().is_err() {
        assert!(Instant::now() < deadline, "the node serves again");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A listener that accepts connections and never answers (a frozen server, or something
/// that is not PostgreSQL): connecting fails, naming it, instead of hanging.
#[test]
fn connecting_to_a_server_that_never_answers_fails() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!(
        "postgresql://u@127.0.0.1:{}/db?connect_timeout=1",
        silent.local_addr().unwrap().port()
    );
    let started = Instant::now();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(idspace_lease::Store::connect(&url).map(|_| ()));
    });
    let error = receiver
        .recv_timeout(Duration::from_secs(20))
        .expect("an answer, not a hang")
        .expect_err("no server");
    assert!(matches!(error, LeaseError::Connection(_)), "{error:?}");
    assert!(error.to_string().contains("did not answer"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(silent);
}
