//! A client that sends requests and never reads its responses must not slow
//! down the others (issue 10): the server's `serve` loop, over shared
//! memory, with one such client and one that does round trips.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received, SendError};
use cornflakes_kv::codec::cornflakes::CornflakesClient;
use cornflakes_kv::server::serve;
use cornflakes_kv::{ClientCodec, Limits, Op, Request, ServerStats, Status, Store, System};

const VALUE_LEN: usize = 2048;

fn get(key: &[u8]) -> Request<'_> {
    Request { op: Op::Get as u32, keys: std::iter::once(key).collect(), ..Request::default() }
}

/// Sends one get and waits for its response; returns its status and value.
fn round_trip(dp: &mut ShmDatapath, codec: &mut CornflakesClient, conn: ConnId, id: u32) -> (Status, Vec<u8>) {
    codec.send_request(dp, conn, id, &get(b"k")).unwrap();
    dp.flush().unwrap();
    let mut out: Vec<Received> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.is_empty() {
        assert!(Instant::now() < deadline, "no response to {id} within 5 s");
        dp.wait(Duration::from_millis(10)).unwrap();
        if let Err(e) = dp.recv_batch(&mut out, 1) {
            panic!("{e} at {id}: {:?}", dp.shm_stats());
        }
    }
    assert_eq!(out[0].msg_id, id);
    let mut got = (Status::Ok, Vec::new());
    codec
        .read_response(&out[0].payload, &mut |status, vals| got = (status, vals.concat()))
        .expect("a well-formed response");
    codec.end_batch();
    got
}

#[test]
fn a_client_that_never_reads_does_not_stall_the_others() {
    let path = std::env::temp_dir().join(format!("cf-kv-overload-{}.sock", std::process::id()));
    let stop = Arc::new(AtomicBool::new(false));
    let config = ShmConfig { ring_size: 64 << 10, max_parked_messages: 64, ..ShmConfig::default() };
    let server = {
        let (path, stop, config) = (path.clone(), stop.clone(), config.clone());
        std::thread::spawn(move || -> ServerStats {
            let mut dp = ShmDatapath::listen(&path, config).unwrap();
            let mut store = Store::new(dp.pool().clone(), Limits::default());
            store.put(b"k", &[&[0x42; VALUE_LEN]]).unwrap();
            serve(&mut dp, &mut store, System::Cornflakes, |_| !stop.load(Ordering::Relaxed)).unwrap()
        })
    };
    let connect = |dp: &mut ShmDatapath| {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match dp.connect_to(&path) {
                Ok(c) => return c,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => panic!("{e}"),
            }
        }
    };
    // The silent client: 3000 gets (about 6 MB of responses, far more than
    // its 64 KiB ring and the server's parking for it), never read.
    let mut silent = ShmDatapath::new(config.clone()).unwrap();
    let sc = connect(&mut silent);
    let mut silent_codec = CornflakesClient::new(silent.scratch_pool());
    for id in 0..3000 {
        // Its own requests meet back-pressure while the server catches up.
        while let Err(e) = silent_codec.send_request(&mut silent, sc, id, &get(b"k")) {
            assert!(matches!(e, SendError::Backlogged(_)), "{e}");
            silent.flush().unwrap();
        }
    }
    silent.flush().unwrap();
    // A well-behaved client connects meanwhile and does round trips.
    let mut good = ShmDatapath::new(config).unwrap();
    let gc = connect(&mut good);
    let mut codec = CornflakesClient::new(good.scratch_pool());
    let start = Instant::now();
    for id in 0..2000 {
        let (status, value) = round_trip(&mut good, &mut codec, gc, id);
        assert_eq!(status, Status::Ok);
        assert_eq!(value, vec![0x42; VALUE_LEN]);
    }
    let took = start.elapsed();
    // The silent client goes first: the server then releases what it held
    // for it instead of leaking it when its datapath is dropped (a peer that
    // neither acknowledges nor leaves is leaked by design).
    drop(silent);
    stop.store(true, Ordering::Relaxed);
    // Wake the server if it sleeps (it stops without answering).
    let _ = codec.send_request(&mut good, gc, 9999, &get(b"k"));
    let _ = good.flush();
    let stats = server.join().unwrap();
    // With a 50 ms wait per undeliverable response, 2000 round trips would
    // take minutes; without, well under a second. 20 s leaves room for a
    // loaded machine and debug builds.
    assert!(took < Duration::from_secs(20), "2000 round trips took {took:?}");
    // What fits in its ring (small records: the value goes by descriptor)
    // and its parking was delivered; the rest dropped, not waited for.
    assert!(stats.dropped_full >= 1000, "the silent client's responses beyond its parking were dropped: {stats:?}");
    // (5001 if the wake-up request got in before the stop was seen.)
    assert!(
        (5000..=5001).contains(&(stats.handled + stats.dropped_full)),
        "every request answered or counted: {stats:?}"
    );
    let _ = std::fs::remove_file(&path);
}
