use std::process::Command;

fn main() -> Result<(), cornflakes_build::Error> {
    record_commit();
    cornflakes_build::compile_protos(&["proto/echo.proto"], &["proto"])
}

/// Records the commit being built in `CF_BUILD_COMMIT`, so that results
/// say which code made them wherever the binary runs (`cf reproduce`'s
/// index; uncommitted changes are not marked). Rebuilt when the checked-out
/// commit moves; "unknown" outside a git checkout (a crate tarball).
fn record_commit() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CF_BUILD_COMMIT={commit}");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=proto");
}
