use idspace_lease::server::{Durability, Throwaway};
use idspace_lease::{Node, Store};
use std::time::Instant;

#[test]
fn smoke() {
    let t = Instant::now();
    let server = Throwaway::start(Durability { fsync: false }).unwrap();
    eprintln!("server up in {:?}", t.elapsed());
    let mut store = Store::connect(&server.url()).unwrap();
    store.create_space("s", 1, 1_000_000, false).unwrap();
    let node = Node::builder(&server.url(), "s").start().unwrap();
    let mut ids: Vec<u64> = (0..100_000)
        .map(|i| node.next_id_on(i % 4).unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 100_000);
    eprintln!("{:?} {:?}", node.stats(), t.elapsed());
}
