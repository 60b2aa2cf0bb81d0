use super::*;

fn small_pool() -> Pool {
    Pool::with_config(PoolConfig { max_bytes: 64 << 20, hugepages: HugePages::Auto, lock: false }).unwrap()
}

#[test]
fn size_classes_round_up() {
    assert_eq!(class_of(0), Some(6));
    assert_eq!(class_of(64), Some(6));
    assert_eq!(class_of(65), Some(7));
    assert_eq!(class_of(4096), Some(12));
    assert_eq!(class_of(MAX_ALLOC), Some(21));
    assert_eq!(class_of(MAX_ALLOC + 1), None);
}

/// Bytes that differ at every word-aligned offset, to catch a run that is not
/// one contiguous buffer (Miri runs this, so only a few words are written).
fn mark_run(buf: &mut [u8]) {
    for at in (0..buf.len()).step_by(REGION_SIZE / 2) {
        buf[at] = (at >> 20) as u8 + 1;
    }
    let last = buf.len() - 1;
    buf[last] = 0xEE;
}

#[test]
fn buffers_above_a_region_are_one_contiguous_run() {
    let pool = small_pool();
    let small = pool.alloc_copy(b"x").unwrap();
    let mut m = pool.alloc(5 << 20).unwrap();
    assert_eq!(m.len(), 5 << 20);
    assert_eq!(m.capacity(), 6 << 20, "three whole regions");
    mark_run(&mut m);
    assert!(pool.recover(&m[..8]).is_none(), "unique until frozen");
    assert!(m.set_len(6 << 20));
    assert!(!m.set_len((6 << 20) + 1));
    m.truncate(5 << 20);
    let big = m.freeze();
    assert_eq!(pool.stats().live_slots, 2);
    assert_eq!(big[(5 << 20) - 1], 0xEE);
    assert_eq!(big[REGION_SIZE], 3, "written at 2 MiB, read back at 2 MiB");
    // Any part of the run, in any of its regions or across their boundaries,
    // is found, and shares the one count.
    for (from, to) in [(0, 8), (REGION_SIZE - 4, REGION_SIZE + 4), (3 << 20, 5 << 20), (0, 5 << 20)] {
        let rec = pool.recover(&big[from..to]).expect("inside the run");
        assert_eq!(rec.as_ptr(), big[from..].as_ptr());
        assert_eq!(rec.len(), to - from);
        assert_eq!(&rec[..], &big[from..to]);
        assert_eq!(big.ref_count(), 2);
        assert_eq!(rec.capacity(), (6 << 20) - from);
    }
    let tail = big.slice(REGION_SIZE * 2 + 1..);
    assert_eq!(tail[0], big[REGION_SIZE * 2 + 1]);
    drop(big);
    assert_eq!(tail.ref_count(), 1, "a view in the last region keeps the run");
    assert_eq!(pool.stats().live_slots, 2);
    let mut again = tail.try_into_mut().expect("the only reference");
    again[0] = 1;
    drop(again);
    assert_eq!(pool.stats().live_slots, 1);
    assert_eq!(&small[..], b"x");
}

#[test]
fn runs_end_where_they_end() {
    let pool = small_pool();
    let a = pool.alloc(3 << 20).unwrap().freeze();
    let b = pool.alloc(3 << 20).unwrap().freeze();
    let (lo, hi) = if a.as_ptr() < b.as_ptr() { (&a, &b) } else { (&b, &a) };
    assert_eq!(hi.as_ptr() as usize - lo.as_ptr() as usize, 4 << 20, "runs of two regions, side by side");
    let at = |addr: *const u8| pool.base().wrapping_add(addr as usize - pool.base() as usize);
    // SAFETY: both runs are live and frozen, adjacent in mapped memory.
    let spanning = unsafe { std::slice::from_raw_parts(at(lo.as_ptr()).add((4 << 20) - 8), 16) };
    assert!(pool.recover(spanning).is_none(), "a slice across two runs");
    // SAFETY: as above, the last bytes of the lower run's capacity.
    let end = unsafe { std::slice::from_raw_parts(at(lo.as_ptr()).add((4 << 20) - 8), 8) };
    assert!(pool.recover(end).is_some(), "the run's capacity is its slot");
}

#[test]
fn freed_runs_are_merged_and_reused_and_stale_heads_are_refused() {
    let pool = small_pool();
    let a = pool.alloc(5 << 20).unwrap().freeze();
    let b = pool.alloc(5 << 20).unwrap().freeze();
    let first = a.as_ptr().min(b.as_ptr());
    let regions = pool.region_count();
    drop(a);
    drop(b);
    assert_eq!(pool.stats().live_slots, 0);
    // The two freed runs (three regions each) merged into one of six.
    let c = pool.alloc(12 << 20).unwrap().freeze();
    assert_eq!(c.as_ptr(), first);
    assert_eq!(pool.region_count(), regions, "no region mapped for a reused run");
    drop(c);
    // A shorter run takes the front of the free range; the rest keeps the
    // old run's stale head, which must not make it recoverable.
    let d = pool.alloc(3 << 20).unwrap().freeze();
    assert_eq!(d.as_ptr(), first);
    let at = |addr: *const u8| pool.base().wrapping_add(addr as usize - pool.base() as usize);
    // SAFETY: the pool never unmaps a region while it lives; only the
    // address is passed to recover.
    let stale = unsafe { std::slice::from_raw_parts(at(first).add(5 << 20), 8) };
    assert!(pool.recover(stale).is_none(), "free region behind a live run");
    // SAFETY: as above.
    let past = unsafe { std::slice::from_raw_parts(at(first).add((4 << 20) - 4), 8) };
    assert!(pool.recover(past).is_none(), "crosses the end of the live run");
    assert!(pool.recover(&d[..]).is_some());
}

#[test]
fn runs_are_bounded_by_the_reservation_and_lend_regions_to_size_classes() {
    // Four regions: the first serves 64-byte slots.
    let pool = Pool::with_config(PoolConfig { max_bytes: 8 << 20, hugepages: HugePages::Never, lock: false }).unwrap();
    let _small = pool.alloc(10).unwrap();
    assert!(matches!(pool.alloc((8 << 20) + 1), Err(AllocError::TooLarge { .. })));
    assert!(matches!(pool.alloc(7 << 20), Err(AllocError::Exhausted { .. })), "needs four, three are left");
    let run = pool.alloc(6 << 20).unwrap();
    assert_eq!(pool.region_count(), 4);
    assert!(matches!(pool.alloc(1 << 20), Err(AllocError::Exhausted { .. })));
    drop(run);
    // All mapped: a size class takes a region the run left.
    let mb = pool.alloc(1 << 20).unwrap();
    assert!(matches!(pool.alloc(5 << 20), Err(AllocError::Exhausted { .. })), "two regions are left");
    let two = pool.alloc(4 << 20).unwrap().freeze();
    assert!(pool.recover(&two[(3 << 20)..]).is_some());
    assert!(pool.recover(&mb[..]).is_none(), "still writable");
    assert_eq!(pool.stats().live_slots, 3);
}

#[test]
fn clone_and_drop_count_and_reuse_slot() {
    let pool = small_pool();
    let a = pool.alloc_copy(b"hello").unwrap();
    assert_eq!(a.ref_count(), 1);
    let b = a.clone();
    assert_eq!(a.ref_count(), 2);
    let addr = a.as_ptr();
    drop(a);
    assert_eq!(b.ref_count(), 1);
    assert_eq!(pool.stats().live_slots, 1);
    drop(b);
    assert_eq!(pool.stats().live_slots, 0);
    // LIFO: the slot just freed is handed out again.
    let c = pool.alloc(10).unwrap();
    assert_eq!(c.as_ptr(), addr);
}

#[test]
fn recover_finds_buffer_inside_slot() {
    let pool = small_pool();
    let buf = pool.alloc_copy(&[7u8; 1000]).unwrap();
    let inner = &buf[100..600];
    let rec = pool.recover(inner).expect("inside a live slot");
    assert_eq!(rec.as_ptr(), inner.as_ptr());
    assert_eq!(rec.len(), 500);
    assert_eq!(buf.ref_count(), 2);
    drop(rec);
    assert_eq!(buf.ref_count(), 1);
}

#[test]
fn recover_rejects_outside_free_and_crossing() {
    let pool = small_pool();
    let heap = vec![1u8; 100];
    assert!(pool.recover(&heap).is_none(), "heap memory is not pool memory");
    assert!(pool.recover(&[]).is_none());

    let a = pool.alloc_copy(&[1; 64]).unwrap();
    let b = pool.alloc_copy(&[2; 64]).unwrap();
    // a and b are adjacent 64-byte slots; a slice spanning both crosses.
    let (lo, hi) = if a.as_ptr() < b.as_ptr() { (&a, &b) } else { (&b, &a) };
    assert_eq!(hi.as_ptr() as usize - lo.as_ptr() as usize, 64);
    // Pointers into the pool are made from its base, which covers the whole
    // reservation (a pointer from one buffer may not reach the next one).
    let at = |addr: *const u8| pool.base().wrapping_add(addr as usize - pool.base() as usize);
    // SAFETY: both slots are live, frozen and adjacent in one mapped region.
    let spanning = unsafe { std::slice::from_raw_parts(at(lo.as_ptr()).add(32), 64) };
    assert!(pool.recover(spanning).is_none());

    let freed_addr = a.as_ptr();
    drop(a);
    // SAFETY: the slot is still mapped (regions are never unmapped while the
    // pool lives) and nothing writes it; we only pass its address to recover.
    let in_free = unsafe { std::slice::from_raw_parts(at(freed_addr), 8) };
    assert!(pool.recover(in_free).is_none(), "a free slot yields none");
}

/// What a peer names by offset (a buffer returned by reference): found
/// when live and frozen, never for a free slot, a writable one, a range
/// across slots or past the mapped pool, with no slice formed to check.
#[test]
fn recover_at_takes_offsets_and_refuses_what_recover_refuses() {
    let pool = small_pool();
    let off = |b: &[u8]| b.as_ptr() as usize - pool.base() as usize;
    let a = pool.alloc_copy(&[1; 64]).unwrap();
    let got = pool.recover_at(off(&a) + 8, 40).expect("inside a live frozen slot");
    assert_eq!((got.as_ptr(), got.len(), a.ref_count()), (a.as_ptr().wrapping_add(8), 40, 2));
    drop(got);
    assert!(pool.recover_at(off(&a), 0).is_none(), "empty");
    assert!(pool.recover_at(off(&a) + 32, 64).is_none(), "crosses into the next slot");
    assert!(pool.recover_at(usize::MAX, 1).is_none() && pool.recover_at(8, usize::MAX).is_none());
    let writable = pool.alloc(64).unwrap();
    assert!(pool.recover_at(off(&writable), 8).is_none(), "a writable buffer is unique");
    let freed = off(&a);
    drop(a);
    assert!(pool.recover_at(freed, 8).is_none(), "a free slot");
    let big = pool.alloc_copy(&vec![9u8; 3 << 20]).unwrap();
    let run = pool.recover_at(off(&big) + (2 << 20), 4096).expect("inside a live run");
    assert_eq!((run[0], big.ref_count()), (9, 2));
    drop(writable);
}

#[test]
fn other_pool_memory_is_not_recovered() {
    let p1 = small_pool();
    let p2 = small_pool();
    let b = p2.alloc(128).unwrap().freeze();
    assert!(p1.recover(&b).is_none());
    assert!(p2.recover(&b).is_some());
}

#[test]
fn grows_regions_on_demand_and_reports_them() {
    let pool = small_pool();
    let before = pool.region_count();
    let bufs: Vec<_> = (0..3).map(|_| pool.alloc(1 << 20).unwrap()).collect();
    assert!(pool.region_count() >= before + 2);
    let regions: Vec<_> = pool.regions().collect();
    assert_eq!(regions.len(), pool.region_count());
    for b in &bufs {
        let a = b.as_ptr();
        assert!(regions.iter().any(|r| a >= r.addr && (a as usize) < r.addr as usize + r.len));
    }
}

#[test]
fn exhaustion_is_an_error_not_a_crash() {
    let pool = Pool::with_config(PoolConfig { max_bytes: 4 << 20, hugepages: HugePages::Never, lock: false }).unwrap();
    let mut held = Vec::new();
    let err = loop {
        match pool.alloc(1 << 20) {
            Ok(b) => held.push(b),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, AllocError::Exhausted { .. }), "{err}");
    held.pop();
    assert!(pool.alloc(1 << 20).is_ok(), "a freed slot is usable again");
    assert!(matches!(pool.alloc(MAX_ALLOC + 1), Err(AllocError::Exhausted { .. })), "a run needs two free regions");
    assert!(matches!(pool.alloc((4 << 20) + 1), Err(AllocError::TooLarge { .. })));
}

#[test]
fn buffers_outlive_the_pool_handle() {
    let pool = small_pool();
    let buf = pool.alloc_copy(b"still here").unwrap();
    drop(pool);
    assert_eq!(&buf[..], b"still here");
    let c = buf.clone();
    drop(buf);
    assert_eq!(&c[..], b"still here");
}

#[test]
fn writable_buffers_are_unique_until_frozen() {
    let pool = small_pool();
    let mut a = pool.alloc(16).unwrap();
    a.as_mut_slice()[0] = 1;
    // The issue-9 program: a pointer into a writable buffer is not found.
    assert!(pool.recover(&a[..]).is_none(), "recover must not find a writable buffer");
    assert!(pool.recover(&a[3..9]).is_none());
    assert!(a.set_len(64));
    assert!(!a.set_len(65), "beyond the slot");
    assert_eq!(a.len(), 64);
    a.truncate(8);
    assert_eq!(a.len(), 8);
    let frozen = a.freeze();
    assert_eq!(frozen.ref_count(), 1);
    assert_eq!(frozen[0], 1);
    let rec = pool.recover(&frozen[2..4]).expect("a frozen buffer is found");
    assert_eq!(frozen.ref_count(), 2);
    drop(rec);
    assert_eq!(pool.stats().live_slots, 1);
    drop(frozen);
    assert_eq!(pool.stats().live_slots, 0);
}

#[test]
fn dropping_a_writable_buffer_frees_its_slot() {
    let pool = small_pool();
    let a = pool.alloc(100).unwrap();
    let addr = a.as_ptr();
    assert_eq!(pool.stats().live_slots, 1);
    drop(a);
    assert_eq!(pool.stats().live_slots, 0);
    assert_eq!(pool.alloc(100).unwrap().as_ptr(), addr, "the slot is reused");
}

#[test]
fn try_into_mut_needs_the_only_reference() {
    let pool = small_pool();
    let a = pool.alloc_copy(b"abcdef").unwrap();
    // Every way of making a second reference blocks it: clone, slice,
    // slice_ref and recover.
    type SecondRef<'p> = Box<dyn Fn(&RcBuf) -> RcBuf + 'p>;
    let second: [SecondRef<'_>; 4] = [
        Box::new(|b| b.clone()),
        Box::new(|b| b.slice(1..3)),
        Box::new(|b| b.slice_ref(&b[2..]).unwrap()),
        Box::new(|b| pool.recover(&b[..1]).unwrap()),
    ];
    let mut a = a;
    for make in &second {
        let other = make(&a);
        a = a.try_into_mut().expect_err("shared: must not become writable");
        assert_eq!(&a[..], b"abcdef");
        drop(other);
    }
    let mut m = a.try_into_mut().expect("now the only reference");
    assert!(pool.recover(&m[..]).is_none(), "unique again: not recoverable");
    m[0] = b'x';
    assert_eq!(&m.freeze()[..], b"xbcdef");
}

#[test]
fn a_writable_view_of_a_slice_keeps_its_offset() {
    let pool = small_pool();
    let a = pool.alloc_copy(&[5u8; 200]).unwrap();
    let tail = a.slice(100..150);
    drop(a);
    let mut m = tail.try_into_mut().unwrap();
    assert_eq!(m.len(), 50);
    assert_eq!(m.capacity(), 256 - 100);
    assert!(m.set_len(156));
    assert!(!m.set_len(157));
    m[155] = 9;
    let f = m.freeze();
    assert_eq!(f[155], 9);
}

#[test]
fn slices_share_the_count() {
    let pool = small_pool();
    let a = pool.alloc_copy(b"0123456789").unwrap();
    let s = a.slice(2..5);
    assert_eq!(&s[..], b"234");
    assert_eq!(a.ref_count(), 2);
    assert!(a.try_slice(5..11).is_none());
    let empty_end = a.slice(10..);
    assert!(empty_end.is_empty());
    let sub = a.slice_ref(&a[3..7]).unwrap();
    assert_eq!(&sub[..], b"3456");
    assert!(a.slice_ref(b"elsewhere").is_none());
}

#[test]
fn count_overflow_panics() {
    let pool = small_pool();
    let a = pool.alloc_copy(&[0u8; 8]).unwrap();
    // SAFETY: test-only: the region entry outlives `a`, which points into it.
    let r = unsafe { a.region.as_ref() };
    let count = r.count(r.slot_of(a.as_ptr()));
    count.set(u32::MAX - 1);
    for attempt in
        [&(|| drop(a.clone())) as &dyn Fn(), &|| drop(a.slice(1..2)), &|| drop(a.slice_ref(&a[..1])), &|| {
            drop(pool.recover(&a[..1]))
        }]
    {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(attempt));
        let message = *result.expect_err("a count past u32::MAX - 1 must panic").downcast::<&str>().unwrap();
        assert!(message.contains("reference count overflow"), "{message}");
        assert_eq!(count.get(), u32::MAX - 1, "the count is unchanged");
    }
    // Put the count back so the slot and the pool are freed (no leak under
    // LeakSanitizer).
    count.set(1);
    drop(a);
    assert_eq!(pool.stats().live_slots, 0);
}

/// Free 2 MiB hugepages according to /proc/meminfo.
fn free_hugepages() -> usize {
    if cfg!(miri) {
        return 0; // no /proc under Miri's isolation, and no hugepages either
    }
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find(|l| l.starts_with("HugePages_Free:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

#[test]
#[cfg_attr(miri, ignore = "hugepages need mmap of a hugetlb memfd")]
fn hugepages_back_the_pool_when_reserved() {
    if free_hugepages() < 2 {
        eprintln!("skipped: no free hugepages (reserve some: echo 8 > /proc/sys/vm/nr_hugepages)");
        return;
    }
    let pool =
        Pool::with_config(PoolConfig { max_bytes: 64 << 20, hugepages: HugePages::Require, lock: false }).unwrap();
    assert_eq!(pool.page_kind(), PageKind::Huge2M);
    let b = pool.alloc_copy(&[3u8; 4096]).unwrap();
    assert_eq!(pool.recover(&b[10..20]).unwrap().len(), 10);
}

#[test]
fn auto_falls_back_to_small_pages() {
    let pool = Pool::with_config(PoolConfig { max_bytes: 64 << 20, hugepages: HugePages::Auto, lock: false }).unwrap();
    let expected = if free_hugepages() >= 1 { PageKind::Huge2M } else { PageKind::Small4K };
    // Another test may take the last free hugepage meanwhile; either kind
    // must work, and with none free it must be small pages.
    if expected == PageKind::Small4K {
        assert_eq!(pool.page_kind(), PageKind::Small4K);
    }
    assert!(pool.alloc(100).is_ok());
}

#[test]
#[cfg_attr(miri, ignore = "pools have no memfd under Miri")]
fn backing_memfd_is_sealed_against_shrinking() {
    let pool = small_pool();
    let seals = rustix::fs::fcntl_get_seals(pool.backing_fd()).unwrap();
    assert!(seals.contains(rustix::fs::SealFlags::SHRINK));
    assert!(!seals.contains(rustix::fs::SealFlags::GROW), "the pool must still be able to grow");
    let len = rustix::fs::fstat(pool.backing_fd()).unwrap().st_size as u64;
    assert!(rustix::fs::ftruncate(pool.backing_fd(), len / 2).is_err(), "shrinking is refused");
}

/// Every length up to past the masked copy's 64 bytes, at every offset
/// within a cache line and right up to a page end (where the masked path
/// steps aside): exactly the source's bytes land, and nothing around them.
#[test]
fn copy_short_copies_exactly_the_bytes() {
    let src: Vec<u8> = (0..3 * 4096).map(|i| (i * 7 + 1) as u8).collect();
    let mut dst = vec![0u8; 3 * 4096];
    let page = 4096 - (dst.as_ptr() as usize & 4095);
    let lens: Vec<usize> = if cfg!(miri) { vec![0, 1, 17, 64, 65] } else { (0..=130).collect() };
    for len in lens {
        let mut starts: Vec<usize> = if cfg!(miri) { vec![0, 5, 63] } else { (0..64).collect() };
        starts.extend((0..if cfg!(miri) { 2 } else { 8 }).map(|k| page + 4096 - len - k));
        for at in starts {
            dst.fill(0);
            copy_short(&mut dst[at..at + len], &src[at + 3..at + 3 + len]);
            assert_eq!(&dst[at..at + len], &src[at + 3..at + 3 + len], "len {len} at {at}");
            assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0), "len {len} at {at}: wrote outside");
        }
    }
}

/// Whether any mapping of this process covers `addr` (`/proc/self/maps`).
fn is_mapped(addr: usize) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines().any(|line| {
        let range = line.split_whitespace().next().unwrap_or("");
        let (lo, hi) = range.split_once('-').unwrap_or(("0", "0"));
        let (lo, hi) = (usize::from_str_radix(lo, 16).unwrap(), usize::from_str_radix(hi, 16).unwrap());
        (lo..hi).contains(&addr)
    })
}

/// A small-page pool whose next region (region 1) fails to map with `fault`;
/// returns the pool and region 1's address.
fn pool_failing_its_second_region(fault: sys::fault::MremapFault) -> (Pool, usize) {
    let pool = Pool::with_config(PoolConfig { max_bytes: 8 << 20, hugepages: HugePages::Never, lock: false }).unwrap();
    assert_eq!(pool.region_count(), 1);
    // Regions lie in a row in one reservation.
    let second = pool.regions().next().unwrap().addr as usize + REGION_SIZE;
    sys::fault::fail_next_mremap(fault);
    // Another size class than the first region's: it needs a new region.
    let err = pool.alloc(4096).unwrap_err();
    assert!(matches!(err, AllocError::Map(_)), "{err}");
    (pool, second)
}

#[test]
#[cfg_attr(miri, ignore = "pools map no memfd under Miri")]
fn a_hole_left_by_a_failed_move_is_filled_and_the_pool_grows_on() {
    let (pool, second) = pool_failing_its_second_region(sys::fault::MremapFault::AfterUnmap);
    assert!(is_mapped(second), "the hole is reserved space again");
    let buf = pool.alloc_copy(&[5u8; 4096]).expect("the region maps on the next try");
    assert_eq!(pool.recover(&buf[..8]).unwrap()[..], [5u8; 8]);
}

#[test]
#[cfg_attr(miri, ignore = "pools map no memfd under Miri")]
fn another_mapping_in_the_hole_survives_the_pool() {
    let (pool, second) = pool_failing_its_second_region(sys::fault::MremapFault::AfterUnmapHoleTaken);
    let page = sys::fault::taken_page().expect("the fault put a page in the hole");
    assert_eq!(page.as_ptr() as usize, second);
    // SAFETY: the test's own private read-write page, mapped by the fault.
    unsafe { page.as_ptr().write(0xab) };
    let err = pool.alloc(4096).unwrap_err();
    assert!(err.to_string().contains("grows no more"), "the pool must not map over it: {err}");
    assert!(pool.alloc(64).is_ok(), "the first region still serves");
    drop(pool);
    assert!(is_mapped(second), "dropping the pool must not unmap another's page");
    // SAFETY: still mapped (checked above) and ours.
    assert_eq!(unsafe { page.as_ptr().read() }, 0xab);
    // SAFETY: the test's page, no longer used.
    unsafe { rustix::mm::munmap(page.as_ptr().cast(), 4096) }.unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "pools map no memfd under Miri")]
fn a_region_that_may_not_be_ours_is_given_up_not_retried() {
    let (pool, second) = pool_failing_its_second_region(sys::fault::MremapFault::BeforeUnmap);
    // The reservation is whole, but a failed move cannot tell that apart
    // from another mapping in a hole: the range is given up.
    assert!(pool.alloc(4096).is_err());
    drop(pool);
    assert!(is_mapped(second), "the given-up range is left mapped (leaked)");
    // SAFETY: the leaked PROT_NONE range is ours and referenced by nothing.
    unsafe { rustix::mm::munmap(second as *mut std::ffi::c_void, REGION_SIZE) }.unwrap();
}
