//! Tells the library whether a sanitizer instruments it (`-Zsanitizer=...` on nightly), which
//! stable Rust's `cfg(sanitize)` cannot be asked: the read-side sections then take the
//! portable, language-level fence after their claim on x86 too (see `src/util/readers.rs`),
//! so that what a sanitizer checks is correct by the language's memory model and not only by
//! the hardware's.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(idspace_sanitized)");
    let sanitizers = std::env::var("CARGO_CFG_SANITIZE").unwrap_or_default();
    if !sanitizers.is_empty() {
        println!("cargo:rustc-cfg=idspace_sanitized");
    }
}
