//! The check every datapath's `Waker` passes (shm, udp, tcp).

use std::time::{Duration, Instant};

use cornflakes_datapath::{Datapath, Waker};

/// `dp` has no peer and no traffic, so only `waker` can end its waits: a
/// wake-up given before a wait ends it at once; one from another thread
/// ends a sleeping 60 s wait, twice (the datapath keeps watching after a
/// wake-up); then the count is reset and a wait sleeps its timeout out.
pub fn wakes_end_sleeping_waits(dp: &mut impl Datapath, waker: &Waker) {
    waker.wake().unwrap();
    let start = Instant::now();
    assert!(dp.wait(Duration::from_secs(60)).unwrap(), "a wake-up given before the wait ends it");
    assert!(start.elapsed() < Duration::from_secs(30), "the early wake-up was lost");
    for round in 0..2 {
        let (woken_tx, woken_rx) = std::sync::mpsc::channel();
        let w = waker.clone();
        let t = std::thread::spawn(move || {
            // Let the datapath fall asleep first.
            std::thread::sleep(Duration::from_millis(300));
            woken_tx.send(Instant::now()).unwrap();
            w.wake().unwrap();
        });
        let start = Instant::now();
        assert!(dp.wait(Duration::from_secs(60)).unwrap());
        let (woke, waked_at) = (Instant::now(), woken_rx.recv().unwrap());
        t.join().unwrap();
        assert!(woke >= waked_at, "round {round}: the wait ended before the wake-up");
        let ran = woke - start;
        assert!(ran < Duration::from_secs(30), "round {round}: the wait ran {ran:?}: the wake-up did not end it");
    }
    let start = Instant::now();
    assert!(!dp.wait(Duration::from_millis(50)).unwrap(), "the count was not reset");
    assert!(start.elapsed() >= Duration::from_millis(50));
}
