//! IDs unique across a cluster, leased from PostgreSQL.
//!
//! Creates two spaces (a monotonic one and a cyclic one) and runs two nodes against them, as
//! two processes of a cluster would: each node leases ranges from the store and hands
//! sub-ranges to its CPUs, so that most IDs touch neither the network nor a shared cache line.
//! The monotonic space's IDs never repeat; the cyclic space's come back once freed and their
//! range returned.
//!
//! The server is the one `IDSPACE_URL` names (a libpq URL or key-value string: the role needs
//! `CREATE` on its schema once, and the spaces are created under unique names), or else a
//! throwaway PostgreSQL started from the system's binaries, as the tests do.
//!
//! Run with `cargo run -p idspace-lease --example lease`, or
//! `IDSPACE_URL=postgresql://app:secret@db:5432/app cargo run -p idspace-lease --example lease`.

use std::collections::HashSet;
use std::time::Duration;

use idspace_lease::server::{Durability, Throwaway};
use idspace_lease::{Node, Store};

const THREADS: usize = 4;
const IDS_PER_THREAD: usize = 10_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Kept until the end of `main`: dropping it stops and deletes the throwaway server.
    let (url, _server) = match std::env::var("IDSPACE_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = Throwaway::start(Durability { fsync: false })?;
            println!("started a throwaway PostgreSQL (set IDSPACE_URL to use your own)");
            (server.url(), Some(server))
        }
    };
    // Unique names, so that running again against one's own server never meets old spaces.
    let suffix = format!("{}_{}", std::process::id(), unix_millis());
    let orders = format!("example_orders_{suffix}");
    let sessions = format!("example_sessions_{suffix}");
    let mut store = Store::connect(&url)?;
    store.create_space(&orders, 1, 1_000_000_000_000, false)?;
    store.create_space(&sessions, 1, 5_000, true)?;

    // Two nodes of one space, as two processes of a cluster: no ID is handed out twice.
    let nodes = [
        Node::builder(&url, &orders).node_id("node-a").start()?,
        Node::builder(&url, &orders).node_id("node-b").start()?,
    ];
    let ids: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let node = &nodes[thread % nodes.len()];
                scope.spawn(move || {
                    (0..IDS_PER_THREAD)
                        .map(|_| node.next_id())
                        .collect::<Result<Vec<u64>, _>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("the thread ran"))
            .collect::<Result<Vec<Vec<u64>>, _>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an ID was handed out twice");
    for (name, node) in ["node-a", "node-b"].iter().zip(&nodes) {
        let stats = node.stats();
        println!(
            "{name}: {} leases of {} IDs in {} round trips (step now {})",
            stats.leases, stats.ids_leased, stats.round_trips, stats.step
        );
    }
    let info = store.space(&orders)?;
    println!(
        "{} unique IDs from {THREADS} threads on 2 nodes; space {orders} leased through {:?}",
        ids.len(),
        info.leased_through
    );

    // A cyclic space: IDs freed by the node come back once their whole lease is free.
    let node = Node::builder(&url, &sessions)
        .step(100, 100)
        .ttl(Duration::from_secs(5))
        .start()?;
    let first: Vec<u64> = (0..100)
        .map(|_| node.next_id_on(0))
        .collect::<Result<_, _>>()?;
    for &id in &first {
        node.free(id)?;
    }
    // The space holds 5,000 IDs: before it runs out, the freed range is leased again.
    let mut came_back = None;
    for taken in 1..=4_900 {
        let id = node.next_id_on(0)?;
        if first.contains(&id) {
            came_back = Some((id, taken));
            break;
        }
    }
    let (id, taken) = came_back.expect("a freed range is leased again before the space runs out");
    println!("cyclic space {sessions}: freed ID {id} handed out again ({taken} IDs taken since the frees)");
    Ok(())
}

/// Milliseconds since the Unix epoch, for unique space names.
fn unix_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis())
}
