//! A program that has not installed the counting allocator gets an error from a memory
//! measurement, not a figure of zero bytes.

#[test]
fn measuring_without_the_counting_allocator_is_an_error() {
    let error = idspace_lab::alloc::measure(|| vec![0u8; 4096]).unwrap_err();
    assert!(error.contains("#[global_allocator]"), "{error}");
}
