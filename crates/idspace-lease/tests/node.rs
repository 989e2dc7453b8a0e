//! One node against a real PostgreSQL: uniqueness under threads, exhausted spaces (monotonic
//! and cyclic), cyclic reuse, named errors (refused credentials, missing
//! rights and failed connections apart from a lost store), the schema.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{duplicates, gaps, gather, server, space};
use idspace_lease::{LeaseError, Node, Store};

#[test]
fn threads_of_one_node_never_get_the_same_id() {
    let server = server();
    space(&server, "threads", 0, u64::from(u32::MAX), false);
    let node = Node::builder(&server.url(), "threads")
        .step(500, 50_000)
        .start()
        .expect("node");
    let ids: Vec<u64> = gather(4, |_| {
        (0..50_000).map(|_| node.next_id().expect("id")).collect()
    });
    assert_eq!(ids.len(), 200_000);
    assert_eq!(duplicates(&ids), 0);
    let stats = node.stats();
    assert!(stats.step > 500, "the step grew under load: {stats:?}");
    assert!(stats.round_trips < 100, "{stats:?}");
    eprintln!(
        "threads: {stats:?}, {} gaps",
        gaps(&server, "threads", ids.len())
    );
}

#[test]
fn an_exhausted_monotonic_space_is_a_named_error() {
    let server = server();
    space(&server, "small", 10, 10_009, false);
    let node = Node::builder(&server.url(), "small")
        .step(1000, 1000)
        .cpus(2)
        .start()
        .expect("node");
    let mut ids = Vec::new();
    let mut errors = 0;
    let mut cpu = 0;
    // Alternate CPUs until both have nothing left.
    while errors < 2 {
        match node.next_id_on(cpu) {
            Ok(id) => {
                ids.push(id);
                errors = 0;
            }
            Err(error) => {
                assert_eq!(error, LeaseError::Exhausted("small".into()));
                errors += 1;
            }
        }
        cpu += 1;
    }
    assert_eq!(duplicates(&ids), 0);
    assert_eq!(ids.len(), 10_000, "every ID, once");
    assert!(ids.iter().all(|&id| (10..=10_009).contains(&id)));
    assert_eq!(gaps(&server, "small", ids.len()), 0);
}

#[test]
fn a_cyclic_space_leases_freed_ranges_again_and_only_those() {
    let server = server();
    space(&server, "cycle", 1, 1000, true);
    let node = Node::builder(&server.url(), "cycle")
        .step(100, 100)
        .sub_range(10)
        .cpus(1)
        .start()
        .expect("node");
    let first: Vec<u64> = (0..1000).map(|_| node.next_id_on(0).expect("id")).collect();
    assert_eq!(duplicates(&first), 0);
    assert_eq!(
        node.next_id_on(0),
        Err(LeaseError::Exhausted("cycle".into()))
    );
    // Freeing misuse is refused by name.
    assert_eq!(node.free(5000), Err(LeaseError::NotIssued(5000)));
    node.free(first[0]).expect("freed");
    assert_eq!(node.free(first[0]), Err(LeaseError::NotIssued(first[0])));
    // Free all but the first lease's last ID: only ranges wholly free come back.
    let kept = first[99];
    for &id in &first[1..] {
        if id != kept {
            node.free(id).expect("freed");
        }
    }
    let started = Instant::now();
    let mut second = Vec::new();
    while second.len() < 900 && started.elapsed() < Duration::from_secs(10) {
        match node.next_id_on(0) {
            Ok(id) => second.push(id),
            Err(LeaseError::Exhausted(_)) => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => panic!("{error:?}"),
        }
    }
    assert_eq!(second.len(), 900, "every returned range leased again");
    // Oldest returned first: the second lease's range was wholly freed first.
    assert_eq!(second[0], first[100]);
    assert_eq!(duplicates(&second), 0);
    let lease_of_kept: HashSet<u64> = first[..100].iter().copied().collect();
    assert!(
        second.iter().all(|id| !lease_of_kept.contains(id)),
        "a range with a live ID came back"
    );
}

#[test]
fn named_errors_and_an_idempotent_schema() {
    assert!(matches!(
        Store::connect("postgresql://[::1"),
        Err(LeaseError::BadUrl(_))
    ));
    assert!(matches!(
        Store::connect("port=notanumber"),
        Err(LeaseError::BadUrl(_))
    ));
    let server = server();
    let mut store = Store::connect(&server.url()).expect("connects");
    // Connecting again migrates nothing twice.
    let mut again = Store::connect(&server.url()).expect("connects again");
    assert_eq!(again.schema_version(), Ok(2));
    assert_eq!(
        store.space("none"),
        Err(LeaseError::UnknownSpace("none".into()))
    );
    assert!(matches!(
        Node::builder(&server.url(), "none").start(),
        Err(LeaseError::UnknownSpace(_))
    ));
    assert!(matches!(
        store.create_space("", 1, 2, false),
        Err(LeaseError::InvalidSpace(_))
    ));
    assert!(matches!(
        store.create_space("x", 3, 2, false),
        Err(LeaseError::InvalidSpace(_))
    ));
    assert!(matches!(
        store.create_space("x", 1, u64::MAX, false),
        Err(LeaseError::InvalidSpace(_))
    ));
    store.create_space("x", 1, 2, false).expect("created");
    assert_eq!(
        store.create_space("x", 1, 2, false),
        Err(LeaseError::SpaceExists("x".into()))
    );
    let node = Node::builder(&server.url(), "x").start().expect("node");
    assert_eq!(node.free(1), Err(LeaseError::NotCyclic("x".into())));
    drop(node);
    // Extreme settings are clamped, never a panic or an overflow.
    store
        .create_space("edge", 0, i64::MAX as u64, true)
        .expect("created");
    let edge = Node::builder(&server.url(), "edge")
        .step(u64::MAX, u64::MAX)
        .ttl(Duration::MAX)
        .target_lease_life(Duration::MAX)
        .sub_range(u64::MAX)
        .cpus(usize::MAX)
        .start()
        .expect("node");
    let ids: Vec<u64> = (0..3).map(|i| edge.next_id_on(i).expect("id")).collect();
    assert_eq!(duplicates(&ids), 0);
    assert_eq!(edge.free(ids[0]), Ok(()));
    // A server that is not there.
    let gone = Node::builder("host=/nonexistent-dir port=5432 user=postgres", "x").start();
    assert!(
        matches!(gone, Err(LeaseError::Connection(_))),
        "{:?}",
        gone.err()
    );
}

#[test]
fn serialization_failures_are_retried() {
    let server = server();
    space(&server, "serial", 1, u64::from(u32::MAX), false);
    // Every transaction serializable: concurrent leases of one space now conflict (40001)
    // instead of waiting for the space's row lock.
    Store::connect(&server.url())
        .expect("connects")
        .client()
        .batch_execute("ALTER DATABASE postgres SET default_transaction_isolation = 'serializable'")
        .expect("altered");
    let url = server.url();
    let grants: Vec<(u64, u64)> = gather(6, |worker| {
        let mut store = Store::connect(&url).expect("connects");
        (0..30)
            .map(|_| {
                let grant = store
                    .lease(
                        "serial",
                        &format!("w{worker}"),
                        10,
                        Duration::from_secs(5),
                        None,
                    )
                    .expect("retried until granted");
                (grant.first, grant.last)
            })
            .collect()
    });
    let mut ids: Vec<u64> = grants
        .iter()
        .flat_map(|&(first, last)| first..=last)
        .collect();
    assert_eq!(ids.len(), 6 * 30 * 10);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 6 * 30 * 10, "overlapping leases");
}

/// A CPU still serving the last sub-range of a monotonic lease that another CPU used up (and
/// so retired) goes on serving it past the lease's deadline: a retired lease is no longer
/// renewed, and a monotonic range is never leased to anyone else.
#[test]
fn the_last_sub_range_of_a_retired_monotonic_lease_outlives_its_deadline() {
    let server = server();
    space(&server, "retired", 1, u64::from(u32::MAX), false);
    let node = Node::builder(&server.url(), "retired")
        .step(20, 20)
        .sub_range(10)
        .cpus(2)
        .ttl(Duration::from_millis(100))
        .start()
        .expect("node");
    // CPU 0 carves 1..=10 and CPU 1 carves 11..=20, the lease's last sub-range.
    let mut ids = vec![
        node.next_id_on(0).expect("id"),
        node.next_id_on(1).expect("id"),
    ];
    // CPU 0 uses up its sub-range and carves again: the first lease is used up and retired.
    ids.extend((0..10).map(|_| node.next_id_on(0).expect("id")));
    // Past the first lease's deadline (90 ms), CPU 1 still serves 12..=20 from it.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..9 {
        ids.push(
            node.next_id_on(1)
                .expect("the rest of the sub-range of a retired lease"),
        );
    }
    ids.extend((0..50).map(|i| node.next_id_on(i).expect("id")));
    assert_eq!(duplicates(&ids), 0);
    assert!(ids.contains(&20), "{ids:?}");
}

#[test]
fn refused_credentials_and_missing_rights_are_named_apart_from_a_lost_store() {
    let server = server();
    space(&server, "guarded", 1, 1000, false);
    server
        .add_role("app", "secret", "scram-sha-256")
        .expect("a role with a password");
    server
        .add_role("elsewhere", "unused", "peer")
        .expect("a role under peer authentication");
    let url = server.url();
    let wrong = url.replace("user=postgres", "user=app password=wrong");
    let missing = url.replace("user=postgres", "user=app");
    let peer = url.replace("user=postgres", "user=elsewhere");
    for url in [&wrong, &missing, &peer] {
        let connected = Store::connect(url).err();
        assert!(
            matches!(connected, Some(LeaseError::Authentication(_))),
            "{url}: {connected:?}"
        );
        let started = Node::builder(url, "guarded").start().err();
        assert!(
            matches!(started, Some(LeaseError::Authentication(_))),
            "{url}: {started:?}"
        );
    }
    // The right password, but no rights on the schema.
    let good = url.replace("user=postgres", "user=app password=secret");
    let denied = Node::builder(&good, "guarded").start().err();
    assert!(
        matches!(&denied, Some(LeaseError::PermissionDenied(why)) if why.contains("42501")),
        "{denied:?}"
    );
    // A database that is not there: the connection fails, with the server's words.
    let no_db = url.replace("dbname=postgres", "dbname=nope");
    let refused = Store::connect(&no_db).err();
    assert!(
        matches!(&refused, Some(LeaseError::Connection(why)) if why.contains("nope")),
        "{refused:?}"
    );
}

#[test]
fn a_graceful_stop_parks_its_tail_for_the_same_node_and_a_crash_is_reclaimed() {
    let server = server();
    space(&server, "parked", 1, u64::from(u32::MAX), false);
    let start = |id: &str| {
        Node::builder(&server.url(), "parked")
            .node_id(id)
            .step(1000, 1000)
            .cpus(1)
            .sub_range(10)
            .start()
            .expect("node")
    };
    let first = start("w1");
    let mut ids: Vec<u64> = (0..25).map(|_| first.next_id_on(0).expect("id")).collect();
    let stopped = first.shutdown().expect("parked");
    // 30 carved of the first lease of 1000; the 5 left in the CPU's sub-range are dropped.
    assert_eq!(stopped.discarded, 5);
    assert!(stopped.parked >= 970, "{stopped:?}");
    // Another identity gets fresh IDs, never the parked tail.
    let other = start("w2");
    let fresh = other.next_id_on(0).expect("id");
    assert!(fresh > 1000, "{fresh}");
    ids.push(fresh);
    // The same identity goes on where it stopped.
    let again = start("w1");
    let resumed = again.next_id_on(0).expect("id");
    assert_eq!(resumed, 31);
    ids.push(resumed);
    assert_eq!(duplicates(&ids), 0);
    // A node that vanishes without a stop leaves its rows; reclaiming them counts their IDs.
    std::mem::forget(again);
    let mut store = Store::connect(&server.url()).expect("connects");
    let held = store.reclaim("parked", "w1").expect("reclaimed");
    assert!(held >= 970, "{held}");
    assert_eq!(store.reclaim("parked", "w1").expect("reclaimed"), 0);
}
