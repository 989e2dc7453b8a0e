//! `ScaledHash` sizing: out-of-range parameters of every `Sizing` variant are refused with a
//! named error (a huge bucket count used to wrap to 0 buckets and panic on the first create).

#![cfg(not(loom))]

use idspace::table::{IdTable, ScaledHash, Sizing, SizingError, MAX_SIZED_BUCKETS};

fn refusal(sizing: Sizing) -> Option<SizingError> {
    ScaledHash::<u64>::with_sizing(sizing).err()
}

#[test]
fn out_of_range_bucket_counts_are_refused() {
    for buckets in [usize::MAX, MAX_SIZED_BUCKETS + 1, usize::MAX / 2 + 2] {
        let too_many = Some(SizingError::TooManyBuckets { buckets });
        assert_eq!(
            refusal(Sizing::Fixed { buckets }),
            too_many,
            "fixed {buckets}"
        );
        let growing = Sizing::Growing {
            initial: buckets,
            max_load: 2,
        };
        assert_eq!(refusal(growing), too_many, "growing from {buckets}");
    }
    assert_eq!(
        refusal(Sizing::Fixed { buckets: 0 }),
        Some(SizingError::NoBuckets)
    );
    let empty = Sizing::Growing {
        initial: 0,
        max_load: 2,
    };
    assert_eq!(refusal(empty), Some(SizingError::NoBuckets));
}

#[test]
fn a_growing_table_needs_a_load_of_at_least_one() {
    let sizing = Sizing::Growing {
        initial: 8,
        max_load: 0,
    };
    assert_eq!(refusal(sizing), Some(SizingError::NoLoad));
    let table = ScaledHash::with_sizing(Sizing::Growing {
        initial: 8,
        max_load: 1,
    })
    .unwrap();
    assert_eq!(table.create(1, 7u64), Ok(0));
}

#[test]
fn in_range_counts_round_up_to_a_power_of_two_and_work() {
    for (asked, got) in [(1, 1), (3, 4), (1000, 1024)] {
        let table = ScaledHash::with_sizing(Sizing::Fixed { buckets: asked }).unwrap();
        assert_eq!(table.buckets(), got, "{asked} buckets asked");
        assert_eq!(table.create(1, 5u64), Ok(0));
        assert_eq!(table.remove(1, 0).map(|e| *e), Ok(5));
    }
}

#[test]
fn the_kernel_sizing_stays_in_range_for_any_cpu_count() {
    for cpus in [0, 1, 2, 8192, usize::MAX] {
        let buckets = Sizing::kernel_buckets(cpus);
        assert!(
            (1..=MAX_SIZED_BUCKETS).contains(&buckets) && buckets.is_power_of_two(),
            "{cpus} CPUs: {buckets} buckets"
        );
    }
    assert_eq!(Sizing::kernel_buckets(2), 1024);
}

#[test]
fn sizing_errors_name_the_limit() {
    let message = SizingError::TooManyBuckets {
        buckets: usize::MAX,
    }
    .to_string();
    assert!(
        message.contains(&MAX_SIZED_BUCKETS.to_string()),
        "{message}"
    );
}
