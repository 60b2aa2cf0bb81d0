//! The C example client (`examples/c/kv_client.c`), compiled with `cc`
//! against `include/cornflakes.h` and the static library, puts and gets a
//! value through `cf kv-server` in the Cornflakes format over shm and tcp.
#![cfg(not(miri))]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Builds the static library and `cf` in this test's profile; the
/// directory they are in.
fn build() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "-p", "cornflakes-capi", "-p", "cf"]);
    if dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    assert!(build.status().unwrap().success(), "building libcornflakes_capi.a and cf failed");
    dir
}

/// `cf kv-server`, stopped when dropped (its stdin closes).
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(cf: &Path, transport: &str, addr: &str) -> Server {
        let mut child = Command::new(cf)
            .args(["kv-server", "--system", "cornflakes", "--workload", "ycsb:keys=100,fields=1,size=64"])
            .args(["--transport", transport, "--addr", addr, "--exit-with-parent"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cf kv-server starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("READY ").map(str::to_owned))
            .expect("the server says READY <address>");
        std::thread::spawn(move || lines.for_each(drop));
        Server { child, addr: ready.trim().to_owned() }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_c_client_puts_and_gets_over_shm_and_tcp() {
    if !have("cc") {
        assert!(std::env::var_os("CI").is_none(), "a C compiler is missing under CI: scripts/setup.sh must install it");
        eprintln!("SKIPPED: no `cc` (install gcc)");
        return;
    }
    let dir = build();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let client = std::env::temp_dir().join(format!("cf-kv-client-{}", std::process::id()));
    let cc = Command::new("cc")
        .args(["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("examples/c/kv_client.c"))
        .arg(dir.join("libcornflakes_capi.a"))
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-lutil", "-o"])
        .arg(&client)
        .output()
        .expect("cc runs");
    assert!(cc.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&cc.stderr));

    let sock = std::env::temp_dir().join(format!("cf-capi-{}.sock", std::process::id()));
    for (transport, addr) in [("shm", sock.to_str().unwrap()), ("tcp", "127.0.0.1:0")] {
        let server = Server::start(&dir.join("cf"), transport, addr);
        let out = Command::new(&client).args([transport, &server.addr]).output().expect("the client runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{transport}: the C client failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("get c-client:key: ok (4096 B, every byte as put)"), "{transport}: {stdout}");
        assert!(stdout.contains("not found, as expected"), "{transport}: {stdout}");
    }
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(&client);
}
