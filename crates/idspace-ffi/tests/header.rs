//! The committed header `include/idspace.h` is what cbindgen generates from the sources now:
//! regenerated into a temporary file and compared. `IDSPACE_BLESS=1` rewrites it instead.

use std::path::Path;

#[test]
fn the_committed_header_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let committed_path = crate_dir.join("include/idspace.h");
    if std::env::var_os("IDSPACE_BLESS").is_some() {
        bindings.write_to_file(&committed_path);
        return;
    }
    let fresh_path = std::env::temp_dir().join(format!("idspace-header-{}.h", std::process::id()));
    bindings.write_to_file(&fresh_path);
    let fresh = std::fs::read_to_string(&fresh_path).expect("the fresh header reads back");
    let _ = std::fs::remove_file(&fresh_path);
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    assert!(
        fresh == committed,
        "include/idspace.h differs from what cbindgen generates from the sources; update it with\n\
         \n    IDSPACE_BLESS=1 cargo test -p idspace-ffi --test header\n\n\
         and commit it. First differing line: {:?}",
        fresh.lines().zip(committed.lines()).find(|(a, b)| a != b)
    );
}
