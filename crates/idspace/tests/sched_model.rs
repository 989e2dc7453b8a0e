//! The runtime against a reference model: random trees of tasks that spawn, yield, panic and
//! await their children, under every policy and worker count. Each tree's result must equal
//! the model's sequential evaluation: every task ran exactly once, every panic was reported to
//! exactly its parent.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod sched_util;

use std::future::Future;
use std::pin::Pin;

use idspace::sched::{Builder, Handle, JoinError, Policy};
use proptest::prelude::*;
use sched_util::yield_now;

/// A task: its value, how often it yields first, whether it panics, and its children.
#[derive(Debug, Clone)]
struct Node {
    value: u64,
    yields: u8,
    panics: bool,
    children: Vec<Node>,
}

fn node() -> impl Strategy<Value = Node> {
    let leaf =
        (0..1000u64, 0..3u8, prop::bool::weighted(0.1)).prop_map(|(value, yields, panics)| Node {
            value,
            yields,
            panics,
            children: Vec::new(),
        });
    leaf.prop_recursive(4, 48, 5, |inner| {
        (0..1000u64, 0..3u8, prop::collection::vec(inner, 0..5)).prop_map(
            |(value, yields, children)| Node {
                value,
                yields,
                panics: false,
                children,
            },
        )
    })
}

/// The model: a panicking task contributes nothing; any other its value plus its children's.
fn expected(node: &Node) -> u64 {
    if node.panics {
        0
    } else {
        node.value + node.children.iter().map(expected).sum::<u64>()
    }
}

fn run(handle: Handle, node: Node) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        for _ in 0..node.yields {
            yield_now().await;
        }
        if node.panics {
            panic!("planned panic");
        }
        let children: Vec<_> = node
            .children
            .into_iter()
            .map(|child| handle.spawn(run(handle.clone(), child)))
            .collect();
        let mut total = node.value;
        for child in children {
            match child.await {
                Ok(sum) => total += sum,
                Err(JoinError::Panicked(_)) => {}
                Err(other) => panic!("child neither completed nor panicked: {other}"),
            }
        }
        total
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn task_trees_evaluate_like_the_model(
        tree in node(),
        policy in prop::sample::select(Policy::ALL.to_vec()),
        workers in 1..4usize,
    ) {
        let runtime = Builder::new().workers(workers).policy(policy).build().unwrap();
        let want = expected(&tree);
        let root_panics = tree.panics;
        let got = runtime.block_on(run(runtime.handle().clone(), tree));
        match got {
            Ok(sum) => prop_assert_eq!(sum, want),
            Err(JoinError::Panicked(_)) => prop_assert!(root_panics),
            Err(other) => prop_assert!(false, "root task: {}", other),
        }
    }
}
