//! `include/cornflakes.h` is what cbindgen makes of `src/lib.rs` today.
#![cfg(not(miri))]

#[test]
fn the_checked_in_header_matches_the_code() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config = cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate")
        .write(&mut generated);
    let path = format!("{dir}/include/cornflakes.h");
    if std::env::var_os("CF_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("header written");
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{path} is out of date with src/lib.rs: run `CF_UPDATE_HEADER=1 cargo test -p cornflakes-capi --test header` and commit it"
    );
}
