//! Shared-memory datapath between two real processes: this test binary
//! re-runs itself (`child_main`, selected by an environment variable) as the
//! peer.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cornflakes::{Arena, Message};
use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received, RecvError, Segment, SendError};
use cornflakes_tests::example::GetM;

const ROLE: &str = "CF_SHM_TEST_ROLE";
const PATH: &str = "CF_SHM_TEST_PATH";
const QUIT: u32 = u32::MAX;

fn socket_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cf-shm-{name}-{}.sock", std::process::id()))
}

fn spawn_child(role: &str, path: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_main", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(PATH, path)
        // The child's own harness lines would mix with ours; panics still
        // reach stderr.
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn recv_one(dp: &mut ShmDatapath) -> Result<Received, RecvError> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.is_empty() {
        assert!(Instant::now() < deadline, "no message within 10 s");
        dp.wait(Duration::from_millis(100))?;
        dp.recv_batch(&mut out, 1)?;
    }
    Ok(out.pop().unwrap())
}

/// The peer process. Does nothing unless started by `spawn_child`.
#[test]
fn child_main() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let path = std::env::var(PATH).unwrap();
    let mut dp = ShmDatapath::connect(&path, ShmConfig::default()).unwrap();
    let conn = dp.connections().next().unwrap();
    match role.as_str() {
        // Echoes every message: small ones copied, large ones sent back
        // zero-copy from the received buffer (the parent gathers them from
        // this process's pool).
        "echo" => loop {
            let r = match recv_one(&mut dp) {
                Ok(r) => r,
                Err(RecvError::Closed(_)) => return,
                Err(e) => panic!("{e}"),
            };
            if r.msg_id == QUIT {
                return;
            }
            let res = if r.payload.len() >= 512 {
                dp.push_segments(conn, r.msg_id, &[Segment::ZeroCopy(r.payload.clone())])
            } else {
                dp.push_buf(conn, r.msg_id, &r.payload)
            };
            res.unwrap();
            dp.poll_completions().unwrap();
        },
        // Says it is ready, then never receives (the parent kills it).
        "hang" => {
            dp.push_buf(conn, 0, b"ready").unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn round_trip_between_processes() {
    let path = socket_path("echo");
    let mut dp = ShmDatapath::listen(&path, ShmConfig::default()).unwrap();
    let mut child = spawn_child("echo", &path);
    let conn = dp.accept(Duration::from_secs(10)).unwrap();
    // Copied messages of many sizes.
    for i in 0..200u32 {
        let data: Vec<u8> = (0..(i * 97) % 5000).map(|x| (x * 7 + i) as u8).collect();
        dp.push_buf(conn, i, &data).unwrap();
        let r = recv_one(&mut dp).unwrap();
        assert_eq!((r.conn, r.msg_id), (conn, i));
        assert_eq!(&r.payload[..], &data[..], "message {i}");
    }
    // Serialize-and-send with zero-copy fields, both ways zero-copy.
    let vals: Vec<_> =
        (0..4u8).map(|k| dp.pool().alloc_copy(&vec![k ^ 0x5A; 700 * (k as usize + 1)]).unwrap()).collect();
    for round in 0..50u32 {
        let arena = Arena::new(dp.pool());
        let mut m = GetM::new_in(&arena);
        m.set_id(round);
        m.append_keys("key");
        for v in &vals {
            m.append_vals(v);
        }
        dp.push_message(conn, 1000 + round, &m).unwrap();
        drop(m);
        let r = recv_one(&mut dp).unwrap();
        assert_eq!(r.msg_id, 1000 + round);
        let rarena = Arena::new(dp.pool());
        let got = GetM::deserialize(&r.payload, &rarena).unwrap();
        assert_eq!(got.get_id(), round);
        for (k, v) in got.get_vals().iter().enumerate() {
            assert_eq!(v.as_bytes(), &vals[k][..]);
        }
        dp.poll_completions().unwrap();
    }
    // The child has received (and so acknowledged) everything.
    assert!(vals.iter().all(|v| v.ref_count() == 1));
    assert_eq!(dp.inflight(conn), 0);
    assert!(dp.stats().zero_copy_segments >= 200);
    dp.push_buf(conn, QUIT, b"").unwrap();
    assert!(child.wait().unwrap().success());
    // The child exited: the connection is reported closed.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline);
        dp.wait(Duration::from_millis(100)).unwrap();
        match dp.recv_batch(&mut Vec::new(), 8) {
            Err(RecvError::Closed(id)) => {
                assert_eq!(id, conn);
                break;
            }
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

fn start_hanging_child(name: &str, config: ShmConfig) -> (ShmDatapath, Child, ConnId, PathBuf) {
    let path = socket_path(name);
    let mut dp = ShmDatapath::listen(&path, config).unwrap();
    let child = spawn_child("hang", &path);
    let conn = dp.accept(Duration::from_secs(10)).unwrap();
    let r = recv_one(&mut dp).unwrap();
    assert_eq!(&r.payload[..], b"ready");
    (dp, child, conn, path)
}

#[test]
fn killed_peer_is_detected_while_waiting_and_references_reclaimed() {
    let (mut dp, mut child, conn, _path) = start_hanging_child("kill-wait", ShmConfig::default());
    // A zero-copy send the child will never acknowledge.
    let value = dp.pool().alloc_copy(&[3u8; 4096]).unwrap();
    dp.push_segments(conn, 1, &[Segment::Copy(b"k"), Segment::ZeroCopy(value.clone())]).unwrap();
    assert_eq!(dp.poll_completions().unwrap(), 0);
    assert_eq!(value.ref_count(), 2);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // An idle wait notices quickly (the socket hangs up), not after the
    // whole timeout.
    let t0 = Instant::now();
    assert!(dp.wait(Duration::from_secs(30)).unwrap());
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    match dp.recv_batch(&mut Vec::new(), 8) {
        Err(RecvError::Closed(id)) => assert_eq!(id, conn),
        other => panic!("expected Closed, got {other:?}"),
    }
    // Reported once; the in-flight reference is back.
    assert!(matches!(dp.recv_batch(&mut Vec::new(), 8), Ok(0)));
    assert_eq!(value.ref_count(), 1);
    assert_eq!(dp.connections().count(), 0);
    assert!(matches!(dp.push_buf(conn, 2, b"x"), Err(SendError::Closed(_))));
    assert_eq!(dp.shm_stats().peers_closed, 1);
}

#[test]
fn killed_peer_is_detected_by_a_sender_on_a_full_ring() {
    let config = ShmConfig { ring_size: 16 << 10, ..ShmConfig::default() };
    let (mut dp, mut child, conn, _path) = start_hanging_child("kill-send", config);
    child.kill().unwrap();
    child.wait().unwrap();
    // Never receiving, only sending: the sender must get Closed, not Full
    // forever (nor a hang).
    let mut fulls = 0;
    let err = loop {
        match dp.push_buf(conn, 0, &[0u8; 1000]) {
            Ok(()) => {}
            Err(SendError::Full) => {
                fulls += 1;
                assert!(fulls < 1000, "still Full after {fulls} tries");
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SendError::Closed(id) if id == conn), "{err:?}");
}
