// The tests of `tcp_netns.rs` and `tcp_netns_multishot.rs`: each defines `RECV_MODE` and
// includes this file.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::PoolConfig;
use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath};
use cornflakes_datapath::{Datapath, Received, Segment};

const ROLE_ENV: &str = "CF_TCP_NETNS_ROLE";
const SERVER_IP: &str = "192.0.2.2";
const STOP: u32 = u32::MAX;
const TEST_NAME: &str = "veth_between_namespaces_at_both_mtus";

fn config() -> TcpConfig {
    TcpConfig {
        recv_mode: RECV_MODE,
        pool_config: PoolConfig { max_bytes: 2 << 30, hugepages: HugePages::Never, lock: false },
        zero_copy_min: 0,
        ..TcpConfig::default()
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/netns.sh")
}

fn recv_one(dp: &mut TcpDatapath, timeout: Duration) -> Option<Received> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while Instant::now() < deadline {
        dp.poll_completions().unwrap();
        match dp.recv_batch(&mut out, 1) {
            Ok(1) => return out.pop(),
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
        dp.wait(Duration::from_millis(20)).unwrap();
    }
    None
}

/// Namespaces and server process; removed on drop.
struct Netns {
    name: String,
    child: Option<Child>,
}

impl Netns {
    fn create(name: String, mtu: u32) -> Result<Self, String> {
        let out = Command::new(script())
            .args(["up", &name, &mtu.to_string()])
            .output()
            .map_err(|e| format!("netns.sh: {e}"))?;
        let ns = Netns { name, child: None };
        if out.status.success() {
            Ok(ns)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        let _ = Command::new(script()).args(["down", &self.name]).status();
    }
}

fn missing_privilege() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root".into());
    }
    match Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => None,
        _ => Some("the `ip` command (iproute2) is missing".into()),
    }
}

/// The echo server in namespace B: each message back, zero-copy out of
/// the received buffer.
fn serve() {
    let mut server = TcpDatapath::bind(format!("{SERVER_IP}:0").parse().unwrap(), config()).expect("listen in B");
    println!("READY {}", server.local_addrs()[0]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let Some(req) = recv_one(&mut server, Duration::from_millis(200)) else { continue };
        if req.msg_id == STOP {
            break;
        }
        server.push_segments(req.conn, req.msg_id, &[Segment::ZeroCopy(req.payload.clone())]).unwrap();
        server.flush().unwrap();
    }
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 11) as u8).collect()
}

fn client(ns_a: &str, server: SocketAddr) -> Result<String, String> {
    let ns = std::fs::File::open(format!("/run/netns/{ns_a}")).map_err(|e| format!("open namespace: {e}"))?;
    rustix::thread::move_into_link_name_space(ns.as_fd(), Some(rustix::thread::LinkNameSpaceType::Network))
        .map_err(|e| format!("setns: {e}"))?;
    let mut dp = TcpDatapath::new(config()).map_err(|e| e.to_string())?;
    let conn = dp.connect(server).map_err(|e| e.to_string())?;
    let sizes = [0, 1, 511, 512, 513, 64 << 10, 1 << 20, 16 << 20];
    for (k, &size) in sizes.iter().enumerate() {
        let body = pattern(size, k as u32);
        let value = dp.pool().alloc_copy(&body).unwrap();
        dp.push_segments(conn, k as u32, &[Segment::ZeroCopy(value)]).unwrap();
        dp.flush().unwrap();
        let back = recv_one(&mut dp, Duration::from_secs(10)).ok_or(format!("no echo of {size} B"))?;
        if back.msg_id != k as u32 || back.payload[..] != body[..] {
            return Err(format!("echo of {size} B differs"));
        }
    }
    dp.push_buf(conn, STOP, b"").unwrap();
    dp.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while dp.in_flight() > 0 && Instant::now() < deadline {
        dp.poll_completions().unwrap();
        dp.wait(Duration::from_millis(10)).unwrap();
    }
    Ok(format!("{:?} {:?}", dp.stats(), dp.tcp_stats()))
}

fn across(mtu: u32) {
    let name = format!("cft{}m{mtu}", std::process::id());
    let mut ns = match Netns::create(name.clone(), mtu) {
        Ok(ns) => ns,
        Err(e) => panic!("root, but scripts/netns.sh up failed: {e}"),
    };
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(script())
        .args(["exec", &name, "b"])
        .arg(exe)
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, "server")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the server in namespace B");
    let stdout = child.stdout.take().unwrap();
    ns.child = Some(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let server: SocketAddr = loop {
        let line = rx.recv_timeout(Duration::from_secs(30)).expect("the server says READY");
        // The test harness prints "test NAME ... " first, on the same line.
        if let Some((_, addr)) = line.split_once("READY ") {
            break addr.trim().parse().unwrap();
        }
    };
    let ns_a = format!("{name}-a");
    let result = std::thread::spawn(move || client(&ns_a, server)).join().expect("client thread");
    match result {
        Ok(stats) => println!("mtu {mtu}: {stats}"),
        Err(e) => panic!("mtu {mtu}: {e}"),
    }
}

#[test]
fn veth_between_namespaces_at_both_mtus() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("server") {
        serve();
        return;
    }
    if let Some(why) = missing_privilege() {
        println!("skipped {TEST_NAME}: {why} (needs root and iproute2 to create network namespaces)");
        return;
    }
    across(1500);
    across(9000);
}
