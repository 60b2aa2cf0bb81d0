//! The UDP datapath between two network namespaces joined by a veth pair.
//!
//! The test creates namespaces `cf-udp-a-<pid>` and `cf-udp-b-<pid>`, a veth
//! pair with 192.0.2.1/24 and 192.0.2.2/24 (TEST-NET-1, reachable only
//! inside those namespaces), runs an echo server in namespace B (this test
//! binary re-executed under `ip netns exec` with `CF_UDP_NETNS_ROLE=server`)
//! and the client on a thread that enters namespace A. A guard deletes the
//! namespaces (and with them the veth pair) and stops the child, even when
//! the test fails. Without root or `ip`, it prints why and skips.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::{Arena, Message, PoolConfig};
use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
use cornflakes_datapath::{Datapath, Received, SendError};
use cornflakes_tests::example::GetM;

const ROLE_ENV: &str = "CF_UDP_NETNS_ROLE";
const SERVER_ENV: &str = "CF_UDP_NETNS_SERVER";
const CLIENT_IP: &str = "192.0.2.1";
const SERVER_IP: &str = "192.0.2.2";
const STOP: u32 = u32::MAX;
const TEST_NAME: &str = "veth_between_namespaces";

fn config() -> UdpConfig {
    UdpConfig {
        pool_config: PoolConfig { max_bytes: 1 << 30, hugepages: HugePages::Auto, lock: false },
        ..UdpConfig::default()
    }
}

fn recv_one(dp: &mut UdpDatapath, timeout: Duration) -> Option<Received> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while Instant::now() < deadline {
        if dp.recv_batch(&mut out, 1).unwrap() == 1 {
            return out.pop();
        }
        dp.wait(Duration::from_millis(50)).unwrap();
    }
    None
}

/// Namespaces, veth pair and child process; all removed on drop.
struct Netns {
    a: String,
    b: String,
    child: Option<Child>,
}

impl Netns {
    fn ip(args: &[&str]) -> Result<(), String> {
        let out = Command::new("ip").args(args).output().map_err(|e| format!("ip {args:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
        }
    }

    fn create() -> Result<Self, String> {
        let pid = std::process::id();
        let ns = Netns { a: format!("cf-udp-a-{pid}"), b: format!("cf-udp-b-{pid}"), child: None };
        let (a, b) = (ns.a.as_str(), ns.b.as_str());
        Self::ip(&["netns", "add", a])?;
        Self::ip(&["netns", "add", b])?;
        Self::ip(&["link", "add", "cfva", "netns", a, "type", "veth", "peer", "name", "cfvb", "netns", b])?;
        Self::ip(&["-n", a, "addr", "add", &format!("{CLIENT_IP}/24"), "dev", "cfva"])?;
        Self::ip(&["-n", b, "addr", "add", &format!("{SERVER_IP}/24"), "dev", "cfvb"])?;
        for (n, dev) in [(a, "cfva"), (b, "cfvb"), (a, "lo"), (b, "lo")] {
            Self::ip(&["-n", n, "link", "set", dev, "up"])?;
        }
        Ok(ns)
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
        // Deleting a namespace deletes the veth end in it, and so the pair.
        let _ = Self::ip(&["netns", "del", &self.a]);
        let _ = Self::ip(&["netns", "del", &self.b]);
    }
}

/// Why this machine cannot run the test, if it cannot.
fn missing_privilege() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root".into());
    }
    match Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => None,
        _ => Some("the `ip` command (iproute2) is missing".into()),
    }
}

/// The echo server, run in namespace B by the re-executed test binary.
fn serve(at: SocketAddr) {
    let mut server = UdpDatapath::bind(at, config()).expect("server bind in namespace B");
    println!("READY {}", server.local_addr());
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let Some(req) = recv_one(&mut server, Duration::from_millis(200)) else { continue };
        if req.msg_id == STOP {
            break;
        }
        // Echo the message as a Cornflakes object: its large values go back
        // zero-copy, straight out of the received packet.
        let arena = Arena::new(server.pool());
        match GetM::deserialize(&req.payload, &arena) {
            Ok(msg) => server.push_message(req.conn, req.msg_id, &msg).unwrap(),
            Err(_) => server.push_buf(req.conn, req.msg_id, &req.payload).unwrap(),
        }
        server.flush().unwrap();
        server.poll_completions().unwrap();
    }
    let s = server.stats();
    let u = server.udp_stats();
    println!(
        "SERVER sent {} zero-copy {} copied {} fixed {}",
        s.sent, s.zero_copy_segments, s.zero_copy_copied, u.sendmsg_zc_fixed
    );
}

fn client(ns_a: &str, server: SocketAddr) -> Result<String, String> {
    let ns = std::fs::File::open(format!("/run/netns/{ns_a}")).map_err(|e| format!("open namespace: {e}"))?;
    rustix::thread::move_into_link_name_space(ns.as_fd(), Some(rustix::thread::LinkNameSpaceType::Network))
        .map_err(|e| format!("setns: {e}"))?;
    let mut dp = UdpDatapath::bind(format!("{CLIENT_IP}:0").parse().unwrap(), config()).map_err(|e| e.to_string())?;
    let conn = dp.connect(server);
    // The veth's 1500-byte MTU limits messages to 1472 - 8 bytes.
    assert_eq!(dp.max_message_len(conn), Some(1464));
    assert!(matches!(dp.push_buf(conn, 1, &[0u8; 1465]), Err(SendError::TooLarge { len: 1465, max: 1464 })));

    let value = dp.pool().alloc_copy(&(0..1200u32).map(|i| (i * 7) as u8).collect::<Vec<_>>()).unwrap();
    const N: u32 = 20;
    for id in 0..N {
        let arena = Arena::new(dp.pool());
        let mut req = GetM::new_in(&arena);
        req.set_id(id);
        req.append_keys("over-veth");
        req.append_vals(&value);
        assert!(req.get_vals()[0].is_zero_copy());
        // The server may not be up yet in theory; it printed READY, so the
        // first datagram is received.
        dp.push_message(conn, id, &req).unwrap();
        dp.flush().unwrap();
        let back = recv_one(&mut dp, Duration::from_secs(5)).ok_or(format!("no echo for message {id}"))?;
        assert_eq!(back.msg_id, id);
        let rarena = Arena::new(dp.pool());
        let echoed = GetM::deserialize(&back.payload, &rarena).map_err(|e| e.to_string())?;
        assert_eq!(echoed.get_id(), id);
        assert_eq!(echoed.get_keys()[0].as_bytes(), b"over-veth");
        assert_eq!(echoed.get_vals()[0].as_bytes(), &value[..]);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while dp.in_flight() > 0 && Instant::now() < deadline {
        dp.poll_completions().unwrap();
        dp.wait(Duration::from_millis(10)).unwrap();
    }
    dp.push_buf(conn, STOP, b"").unwrap();
    dp.flush().unwrap();
    let (s, u) = (dp.stats(), dp.udp_stats());
    assert_eq!(s.received, u64::from(N));
    assert_eq!(s.zero_copy_segments, u64::from(N));
    assert_eq!(u.notifications, u64::from(N), "{u:?}");
    if dp.kernel_support().report_usage {
        assert_eq!(s.zero_copy_copied, u64::from(N), "veth copies zero-copy sends across namespaces: {s:?}");
    }
    assert_eq!(u.send_errors, 0);
    Ok(format!("client: {s:?} {u:?}"))
}

#[test]
fn veth_between_namespaces() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("server") {
        serve(std::env::var(SERVER_ENV).unwrap().parse().unwrap());
        return;
    }
    if let Some(why) = missing_privilege() {
        println!("skipped {TEST_NAME}: {why} (needs root and iproute2 to create network namespaces)");
        return;
    }
    let mut ns = match Netns::create() {
        Ok(ns) => ns,
        Err(e) => {
            println!("skipped {TEST_NAME}: cannot create namespaces and a veth pair: {e}");
            return;
        }
    };
    let server: SocketAddr = format!("{SERVER_IP}:7100").parse().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.b])
        .arg(exe)
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, "server")
        .env(SERVER_ENV, server.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the server under ip netns exec");
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
    let ready = loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            // libtest prints "test <name> ... " before it, on the same line.
            Ok(line) if line.contains("READY ") => break true,
            Ok(_) => continue,
            Err(_) => break false,
        }
    };
    assert!(ready, "the server in namespace {} did not start", ns.b);

    let a = ns.a.clone();
    let result = std::thread::spawn(move || client(&a, server)).join();
    let summary = match result {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => panic!("client failed: {e}"),
        Err(p) => std::panic::resume_unwind(p),
    };
    println!("{summary}");
    let status = ns.child.as_mut().unwrap().wait().unwrap();
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
        println!("{line}");
    }
    assert!(status.success(), "server exited with {status}");
}
