use cornflakes::Pool;

use super::*;
use crate::protocol::Request;

fn store() -> Store {
    Store::new(Pool::new().expect("pool"), Limits::default())
}

fn req<'r>(op: Op, keys: &[&'r [u8]], vals: &[&'r [u8]], index: u32) -> Request<'r> {
    Request { op: op as u32, keys: keys.iter().copied().collect(), vals: vals.iter().copied().collect(), index }
}

fn run(store: &mut Store, r: &Request<'_>) -> (Status, Vec<Vec<u8>>) {
    let mut out = ResponseVals::new();
    let status = store.execute(r, &mut out);
    (status, out.iter().map(|v| v.to_vec()).collect())
}

#[test]
fn put_then_get_returns_a_copy_in_the_pool() {
    let mut s = store();
    let value = vec![7u8; 1000];
    assert_eq!(run(&mut s, &req(Op::Put, &[b"k"], &[&value], 0)).0, Status::Ok);
    let (status, vals) = run(&mut s, &req(Op::Get, &[b"k"], &[], 0));
    assert_eq!((status, vals), (Status::Ok, vec![value.clone()]));
    let stored = s.get(b"k").unwrap().single().unwrap();
    assert!(s.pool.recover(stored.as_slice()).is_some(), "values live in the pool");
    assert_eq!(s.value_bytes(), 1000);
}

#[test]
fn put_swaps_in_new_buffers_and_leaves_old_references_intact() {
    let mut s = store();
    run(&mut s, &req(Op::Put, &[b"k"], &[b"old value"], 0));
    // An in-flight send holds a reference to the old value.
    let in_flight = s.get(b"k").unwrap().single().unwrap().clone();
    run(&mut s, &req(Op::Put, &[b"k"], &[b"new value!"], 0));
    assert_eq!(in_flight.as_slice(), b"old value");
    assert_eq!(s.get(b"k").unwrap().single().unwrap().as_slice(), b"new value!");
    assert_eq!(s.value_bytes(), 10);
    assert_eq!(s.len(), 1);
}

#[test]
fn lists_get_list_get_from_list_and_append() {
    let mut s = store();
    assert_eq!(run(&mut s, &req(Op::Put, &[b"l"], &[b"a", b"bb", b"ccc"], 0)).0, Status::Ok);
    assert_eq!(run(&mut s, &req(Op::GetList, &[b"l"], &[], 0)).1, vec![b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]);
    assert_eq!(run(&mut s, &req(Op::GetFromList, &[b"l"], &[], 2)).1, vec![b"ccc".to_vec()]);
    assert_eq!(run(&mut s, &req(Op::GetFromList, &[b"l"], &[], 3)).0, Status::NotFound);
    assert_eq!(run(&mut s, &req(Op::Get, &[b"l"], &[], 0)).0, Status::BadRequest, "get of a list value");
    assert_eq!(run(&mut s, &req(Op::Append, &[b"l"], &[b"dddd"], 0)).0, Status::Ok);
    assert_eq!(run(&mut s, &req(Op::Append, &[b"new"], &[b"x"], 0)).0, Status::Ok);
    assert_eq!(run(&mut s, &req(Op::GetList, &[b"l"], &[], 0)).1.len(), 4);
    assert_eq!(run(&mut s, &req(Op::GetList, &[b"new"], &[], 0)).1, vec![b"x".to_vec()]);
    assert_eq!(s.value_bytes(), 1 + 2 + 3 + 4 + 1);
}

#[test]
fn put_many_and_get_many() {
    let mut s = store();
    assert_eq!(run(&mut s, &req(Op::PutM, &[b"a", b"b"], &[b"1", b"22"], 0)).0, Status::Ok);
    assert_eq!(run(&mut s, &req(Op::GetM, &[b"b", b"a"], &[], 0)).1, vec![b"22".to_vec(), b"1".to_vec()]);
    assert_eq!(run(&mut s, &req(Op::GetM, &[b"a", b"zz"], &[], 0)), (Status::NotFound, vec![]));
    assert_eq!(run(&mut s, &req(Op::PutM, &[b"a", b"b"], &[b"1"], 0)).0, Status::BadRequest);
}

#[test]
fn echo_returns_the_request_values() {
    let mut s = store();
    assert_eq!(run(&mut s, &req(Op::Echo, &[], &[b"x", b"yz"], 0)).1, vec![b"x".to_vec(), b"yz".to_vec()]);
    assert!(s.is_empty());
}

#[test]
fn bad_requests_get_statuses() {
    let mut s = store();
    let long_key = vec![b'k'; 2000];
    let big = vec![0u8; (1 << 20) + 1];
    let many: Vec<&[u8]> = vec![b"k"; 65];
    assert_eq!(run(&mut s, &Request { op: 99, ..Request::default() }).0, Status::UnknownOp);
    assert_eq!(run(&mut s, &Request { op: 0, ..Request::default() }).0, Status::UnknownOp);
    assert_eq!(run(&mut s, &req(Op::Get, &[], &[], 0)).0, Status::BadRequest);
    assert_eq!(run(&mut s, &req(Op::Get, &[b"missing"], &[], 0)).0, Status::NotFound);
    assert_eq!(run(&mut s, &req(Op::Put, &[&long_key], &[b"v"], 0)).0, Status::TooLarge);
    assert_eq!(run(&mut s, &req(Op::Put, &[b""], &[b"v"], 0)).0, Status::BadRequest);
    assert_eq!(run(&mut s, &req(Op::Put, &[b"k"], &[&big], 0)).0, Status::TooLarge);
    assert_eq!(run(&mut s, &req(Op::Put, &[b"k"], &[], 0)).0, Status::BadRequest);
    assert_eq!(run(&mut s, &req(Op::GetM, &many, &[], 0)).0, Status::TooLarge);
    assert_eq!(run(&mut s, &req(Op::Append, &[b"k"], &[b"a", b"b"], 0)).0, Status::BadRequest);
    assert!(s.is_empty(), "no failed request changed the store");
}

#[test]
fn preload_fills_elements() {
    let mut s = store();
    s.insert_with(b"k", &[3, 5], |i, buf| buf.fill(i as u8 + 1)).unwrap();
    let v = s.get(b"k").unwrap();
    assert_eq!((v.get(0).unwrap().as_slice(), v.get(1).unwrap().as_slice()), (&[1u8; 3][..], &[2u8; 5][..]));
}

#[test]
fn prepend_remove_and_clear_keep_the_byte_count() {
    let mut s = store();
    s.append(b"l", b"b").unwrap();
    s.prepend(b"l", b"a").unwrap();
    s.prepend(b"new", b"x").unwrap();
    let list: Vec<&[u8]> = s.get(b"l").unwrap().iter().map(|b| b.as_slice()).collect();
    assert_eq!(list, [&b"a"[..], b"b"]);
    assert_eq!(s.value_bytes(), 3);
    let held = s.get(b"l").unwrap().first().unwrap().clone();
    assert!(s.remove(b"l"));
    assert!(!s.remove(b"l"));
    assert_eq!(held.as_slice(), b"a", "a removed value referenced elsewhere stays intact");
    assert_eq!((s.len(), s.value_bytes()), (1, 1));
    s.clear();
    assert_eq!((s.len(), s.value_bytes()), (0, 0));
}

#[test]
fn many_prepends_keep_their_order() {
    let mut s = Store::new(Pool::new().expect("pool"), Limits { max_list: 1 << 20, ..Limits::default() });
    let n = if cfg!(miri) { 300 } else { 10_000u32 };
    for i in 0..n {
        s.prepend(b"l", &i.to_le_bytes()).unwrap();
    }
    let l = s.get(b"l").unwrap();
    assert_eq!(l.len(), n as usize);
    assert_eq!(l.first().unwrap().as_slice(), (n - 1).to_le_bytes());
    assert_eq!(l.get(n as usize - 1).unwrap().as_slice(), 0u32.to_le_bytes());
    assert!(l.get(n as usize).is_none());
    assert!(l.single().is_none());
}

/// One step of the list model.
#[derive(Clone, Debug)]
enum ListOp {
    Prepend(u8),
    Append(u8),
    Put(Vec<u8>),
    Remove,
    Pop { front: bool },
}

fn list_op() -> impl proptest::strategy::Strategy<Value = ListOp> {
    use proptest::prelude::*;
    prop_oneof![
        4 => any::<u8>().prop_map(ListOp::Prepend),
        4 => any::<u8>().prop_map(ListOp::Append),
        1 => proptest::collection::vec(any::<u8>(), 1..4).prop_map(ListOp::Put),
        1 => Just(ListOp::Remove),
        3 => any::<bool>().prop_map(|front| ListOp::Pop { front }),
    ]
}

proptest::proptest! {
    // Fewer cases under Miri, which runs each about a thousand times slower.
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    /// Prepends, appends, pops at both ends, puts and removes give the
    /// elements, length, byte count and plain-value view a `VecDeque` would
    /// (a list goes with its last element, as in Redis).
    #[test]
    fn lists_behave_like_a_deque(ops in proptest::collection::vec(list_op(), 1..80)) {
        let mut s = store();
        s.track_accesses(true);
        let mut model: Option<std::collections::VecDeque<u8>> = None;
        for op in ops {
            match op {
                ListOp::Prepend(b) => {
                    s.prepend(b"l", &[b]).unwrap();
                    model.get_or_insert_with(Default::default).push_front(b);
                }
                ListOp::Append(b) => {
                    s.append(b"l", &[b]).unwrap();
                    model.get_or_insert_with(Default::default).push_back(b);
                }
                ListOp::Put(v) => {
                    let elems: Vec<&[u8]> = v.iter().map(std::slice::from_ref).collect();
                    s.put(b"l", &elems).unwrap();
                    model = Some(v.into_iter().collect());
                }
                ListOp::Remove => {
                    proptest::prop_assert_eq!(s.remove(b"l"), model.take().is_some());
                }
                ListOp::Pop { front } => {
                    let got = s.pop(b"l", front).map(|b| b.as_slice()[0]);
                    let want = model.as_mut().and_then(|m| if front { m.pop_front() } else { m.pop_back() });
                    proptest::prop_assert_eq!(got, want);
                    if model.as_ref().is_some_and(|m| m.is_empty()) {
                        model = None;
                    }
                }
            }
            let got: Option<Vec<u8>> = s.get(b"l").map(|l| l.iter().map(|b| b.as_slice()[0]).collect());
            let want: Option<Vec<u8>> = model.as_ref().map(|m| m.iter().copied().collect());
            proptest::prop_assert_eq!(&got, &want);
            let n = want.as_ref().map_or(0, |w| w.len());
            proptest::prop_assert_eq!(s.value_bytes(), n);
            proptest::prop_assert_eq!(s.len(), usize::from(want.is_some()));
            proptest::prop_assert_eq!(s.key_index().map(KeyIndex::len), Some(s.len()), "the eviction index follows");
            proptest::prop_assert_eq!(s.data_bytes(), n + usize::from(want.is_some()), "one key byte");
            proptest::prop_assert!(s.fronts.values().all(|f| !f.is_empty()), "an emptied front is not kept");
            if let (Some(l), Some(w)) = (s.get(b"l"), want.as_ref()) {
                proptest::prop_assert_eq!(l.len(), w.len());
                proptest::prop_assert_eq!(l.single().map(|b| b.as_slice()[0]), (w.len() == 1).then(|| w[0]));
                for (i, &x) in w.iter().enumerate() {
                    proptest::prop_assert_eq!(l.get(i).map(|b| b.as_slice()[0]), Some(x));
                }
            }
        }
    }
}

#[test]
fn rename_moves_the_value_and_its_prepends_and_keeps_the_counts() {
    let mut s = store();
    s.append(b"list", b"b").unwrap();
    s.prepend(b"list", b"a").unwrap();
    s.put(b"other", &[b"xyz"]).unwrap();
    let before = s.data_bytes();
    assert!(s.rename(b"list", b"l2"));
    assert_eq!(s.data_bytes(), before - 4 + 2, "the key is shorter by two bytes");
    let got: Vec<u8> = s.get(b"l2").unwrap().iter().map(|b| b.as_slice()[0]).collect();
    assert_eq!(got, b"ab");
    assert!(s.get(b"list").is_none() && s.fronts.contains_key(&b"l2"[..]), "the prepend moved with it");
    // Onto an existing key: its value goes.
    assert!(s.rename(b"l2", b"other"));
    assert_eq!((s.len(), s.value_bytes()), (1, 2));
    assert_eq!(s.data_bytes(), 5 + 2);
    assert!(s.rename(b"other", b"other"));
    assert!(!s.rename(b"nothing", b"x"));
    assert_eq!(s.len(), 1);
}

/// A step on two keys, each of which may be a hash or a plain value.
#[derive(Clone, Debug)]
enum HashOp {
    Set { key: u8, field: u8, len: usize },
    Remove { key: u8, field: u8 },
    Put { key: u8, len: usize },
    Rename { from: u8, to: u8 },
    Delete { key: u8 },
}

fn hash_op() -> impl proptest::strategy::Strategy<Value = HashOp> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..2u8, 0..6u8, 0..40usize).prop_map(|(key, field, len)| HashOp::Set { key, field, len }),
        3 => (0..2u8, 0..6u8).prop_map(|(key, field)| HashOp::Remove { key, field }),
        1 => (0..2u8, 1..40usize).prop_map(|(key, len)| HashOp::Put { key, len }),
        1 => (0..2u8, 0..2u8).prop_map(|(from, to)| HashOp::Rename { from, to }),
        1 => (0..2u8).prop_map(|key| HashOp::Delete { key }),
    ]
}

/// What one key holds in the model: a hash (fields in insertion order) or
/// a plain value of some length.
#[derive(Clone, Debug)]
enum Held {
    Hash(Vec<(u8, usize)>),
    Plain(usize),
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    /// Hashes against a model: fields in insertion order (a hash this
    /// small keeps it), a key in one kind at a time, the key gone with its
    /// last field, and the byte counts maxmemory reads exact.
    #[test]
    fn hashes_behave_like_ordered_maps(ops in proptest::collection::vec(hash_op(), 1..80), track in proptest::bool::ANY) {
        let mut s = store();
        s.track_accesses(track);
        let mut model: [Option<Held>; 2] = [None, None];
        let name = |k: u8| [b'a' + k];
        for op in ops {
            match op {
                HashOp::Set { key, field, len } => {
                    let new = s.hash_set(&name(key), &[field], &vec![field; len]).unwrap();
                    let fields = match &mut model[key as usize] {
                        Some(Held::Hash(f)) => f,
                        slot => {
                            *slot = Some(Held::Hash(Vec::new()));
                            let Some(Held::Hash(f)) = slot else { unreachable!() };
                            f
                        }
                    };
                    match fields.iter_mut().find(|(f, _)| *f == field) {
                        Some(entry) => {
                            proptest::prop_assert!(!new);
                            entry.1 = len;
                        }
                        None => {
                            proptest::prop_assert!(new);
                            fields.push((field, len));
                        }
                    }
                }
                HashOp::Remove { key, field } => {
                    let removed = s.hash_remove(&name(key), &[field]);
                    let mut want = false;
                    if let Some(Held::Hash(fields)) = &mut model[key as usize] {
                        if let Some(i) = fields.iter().position(|(f, _)| *f == field) {
                            fields.remove(i);
                            want = true;
                        }
                        if fields.is_empty() {
                            model[key as usize] = None;
                        }
                    }
                    proptest::prop_assert_eq!(removed, want);
                }
                HashOp::Put { key, len } => {
                    s.put(&name(key), &[&vec![9; len]]).unwrap();
                    model[key as usize] = Some(Held::Plain(len));
                }
                HashOp::Rename { from, to } => {
                    let moved = s.rename(&name(from), &name(to));
                    proptest::prop_assert_eq!(moved, model[from as usize].is_some());
                    if moved && from != to {
                        model[to as usize] = model[from as usize].take();
                    }
                }
                HashOp::Delete { key } => {
                    proptest::prop_assert_eq!(s.remove(&name(key)), model[key as usize].take().is_some());
                }
            }
            let mut bytes = 0;
            for (k, held) in model.iter().enumerate() {
                let key = name(k as u8);
                match held {
                    None => proptest::prop_assert!(s.get(&key).is_none() && s.hash(&key).is_none()),
                    Some(Held::Plain(len)) => {
                        proptest::prop_assert!(s.hash(&key).is_none(), "a key is of one kind");
                        proptest::prop_assert_eq!(s.get(&key).and_then(|v| v.single()).map(|b| b.len()), Some(*len));
                        bytes += 1 + len;
                    }
                    Some(Held::Hash(fields)) => {
                        proptest::prop_assert!(s.get(&key).is_none(), "a key is of one kind");
                        let h = s.hash(&key).expect("a hash");
                        let got: Vec<(u8, usize)> = h.iter().map(|(f, v)| (f[0], v.len())).collect();
                        proptest::prop_assert_eq!(&got, fields);
                        for &(f, len) in fields {
                            proptest::prop_assert_eq!(h.get(&[f]).map(|v| v.as_slice().to_vec()), Some(vec![f; len]));
                        }
                        bytes += 1 + fields.iter().map(|(_, len)| 1 + len).sum::<usize>();
                    }
                }
            }
            proptest::prop_assert_eq!(s.len(), model.iter().flatten().count());
            proptest::prop_assert_eq!(s.keys().count(), s.len());
            if let Some(index) = s.key_index() {
                proptest::prop_assert_eq!(index.len(), s.len(), "the eviction index has every key, once");
                proptest::prop_assert!(s.keys().all(|k| index.get(k).is_some()));
            }
            proptest::prop_assert_eq!(s.data_bytes(), bytes, "keys, fields and values");
        }
    }
}

#[test]
fn sets_count_their_members_and_go_with_the_last_one() {
    let mut s = store();
    assert!(s.set_add(b"s", b"ab").unwrap());
    assert!(!s.set_add(b"s", b"ab").unwrap(), "already a member");
    assert!(s.set_add(b"s", b"cde").unwrap());
    assert_eq!((s.len(), s.data_bytes()), (1, 1 + 2 + 3));
    assert_eq!(s.set(b"s").unwrap().iter().collect::<Vec<_>>(), [&b"ab"[..], b"cde"]);
    assert!(s.hash(b"s").is_none() && s.get(b"s").is_none(), "a key is of one kind");
    // A hash at the same key replaces the set (RESP checks kinds first).
    s.hash_set(b"s", b"f", b"v").unwrap();
    assert!(s.set(b"s").is_none());
    assert_eq!(s.data_bytes(), 1 + 1 + 1);
    s.remove(b"s");
    s.set_add(b"s", b"x").unwrap();
    s.set_add(b"s", b"yy").unwrap();
    assert_eq!(s.set_take(b"s", 0).as_deref(), Some(&b"x"[..]));
    assert!(!s.set_remove(b"s", b"x"));
    assert!(s.set_remove(b"s", b"yy"));
    assert!(s.set(b"s").is_none() && s.is_empty(), "gone with its last member");
    assert_eq!(s.data_bytes(), 0);
}

/// A sorted-set step: a member's score set or the member removed.
#[derive(Clone, Debug)]
enum ZOp {
    Insert(u8, f64),
    Remove(u8),
}

fn z_op() -> impl proptest::strategy::Strategy<Value = ZOp> {
    use proptest::prelude::*;
    let score = prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        (-5i32..5).prop_map(f64::from),
        (-5i32..5).prop_map(|n| f64::from(n) + 0.5),
    ];
    prop_oneof![3 => (0..40u8, score).prop_map(|(m, s)| ZOp::Insert(m, s)), 1 => (0..40u8).prop_map(ZOp::Remove)]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    /// Sorted sets against a sorted list: order by score then member,
    /// ranks, positions, score ranges with either bound exclusive, and the
    /// byte count.
    #[test]
    fn sorted_sets_order_rank_and_range_like_a_sorted_list(
        // Every step checks every rank and range: fewer steps under Miri.
        ops in proptest::collection::vec(z_op(), if cfg!(miri) { 1..16 } else { 1..120 }),
        bounds in proptest::collection::vec((-6i32..6, proptest::bool::ANY, -6i32..6, proptest::bool::ANY), 4),
    ) {
        let mut s = store();
        let mut model: std::collections::BTreeMap<u8, f64> = Default::default();
        for op in ops {
            match op {
                ZOp::Insert(m, score) => {
                    let old = s.zset_insert(b"z", &[m], score).unwrap();
                    proptest::prop_assert_eq!(old, model.insert(m, score));
                }
                ZOp::Remove(m) => proptest::prop_assert_eq!(s.zset_remove(b"z", &[m]), model.remove(&m)),
            }
            let mut sorted: Vec<(f64, u8)> = model.iter().map(|(&m, &sc)| (sc, m)).collect();
            sorted.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
            let Some(z) = s.zset(b"z") else {
                proptest::prop_assert!(model.is_empty(), "the key goes with its last member");
                continue;
            };
            let got: Vec<(f64, u8)> = z.iter().map(|(m, sc)| (sc, m[0])).collect();
            proptest::prop_assert_eq!(&got, &sorted);
            for (i, &(sc, m)) in sorted.iter().enumerate() {
                proptest::prop_assert_eq!(z.rank(&[m]), Some(i));
                proptest::prop_assert_eq!(z.get_index(i).map(|(mm, ss)| (ss, mm[0])), Some((sc, m)));
            }
            for &(a, ax, b, bx) in &bounds {
                let (lo, hi) = (f64::from(a) / 2.0, f64::from(b) / 2.0);
                let want: Vec<(f64, u8)> = sorted
                    .iter()
                    .copied()
                    .filter(|&(sc, _)| (if ax { sc > lo } else { sc >= lo }) && (if bx { sc < hi } else { sc <= hi }))
                    .collect();
                let r = z.score_range((lo, ax), (hi, bx));
                let got: Vec<(f64, u8)> = z.range(r.clone()).map(|(m, sc)| (sc, m[0])).collect();
                proptest::prop_assert_eq!(&got, &want, "{:?}", (lo, ax, hi, bx));
                let rev: Vec<(f64, u8)> = z.range(r).rev().map(|(m, sc)| (sc, m[0])).collect();
                proptest::prop_assert!(rev.iter().rev().eq(want.iter()));
            }
            let full = z.score_range((f64::NEG_INFINITY, false), (f64::INFINITY, false));
            proptest::prop_assert_eq!(full, 0..sorted.len());
            proptest::prop_assert_eq!(s.data_bytes(), 1 + 9 * sorted.len());
        }
    }
}

#[test]
fn entries_move_between_stores_with_their_buffers_and_counts() {
    let pool = Pool::new().expect("pool");
    let mut a = Store::new(pool.clone(), Limits::default());
    let mut b = Store::new(pool, Limits::default());
    b.track_accesses(true);
    a.put(b"l", &[b"x", b"yy"]).unwrap();
    a.prepend(b"l", b"w").unwrap();
    a.hash_set(b"h", b"f", b"vvv").unwrap();
    let buf = a.get(b"l").unwrap().get(1).unwrap().as_ptr();
    let (before, len) = (a.data_bytes(), a.len());
    let shared = a.entry(b"h").unwrap();
    b.put_entry(b"h2", shared);
    assert_eq!(b.data_bytes(), 2 + 1 + 3, "counted where it is put");
    assert_eq!((a.data_bytes(), a.len()), (before, len), "a copy leaves the source alone");
    let moved = a.take(b"l").unwrap();
    b.put_entry(b"l", moved);
    assert!(a.get(b"l").is_none() && a.data_bytes() == 1 + 1 + 3);
    let l = b.get(b"l").unwrap();
    assert_eq!(
        l.iter().map(|e| e.as_slice().to_vec()).collect::<Vec<_>>(),
        [b"w".to_vec(), b"x".to_vec(), b"yy".to_vec()]
    );
    assert_eq!(l.get(1).unwrap().as_ptr(), buf, "the same buffer, not a copy");
    assert_eq!(b.key_index().map(KeyIndex::len), Some(2), "the eviction index knows both");
    b.put_entry(b"l", b.entry(b"h2").unwrap());
    assert!(b.get(b"l").is_none() && b.hash(b"l").is_some(), "put replaces what the key held");
    assert_eq!(b.data_bytes(), 2 * (2 + 1 + 3) - 1, "h2 and l (one byte shorter key)");
}

#[test]
fn list_edits_keep_the_byte_count_and_merge_prepends_once() {
    let mut s = store();
    for b in [b"b", b"c", b"d"] {
        s.append(b"l", b).unwrap();
    }
    s.prepend(b"l", b"a").unwrap();
    let buf = |s: &Store, v: &[u8]| s.alloc_value(v).unwrap();
    let x = buf(&s, b"xxx");
    s.edit_list(b"l", |l| l.set(0, x)).unwrap();
    let y = buf(&s, b"yy");
    s.edit_list(b"l", |l| l.insert(4, y)).unwrap();
    let items = |s: &Store| s.get(b"l").unwrap().iter().map(|b| b.as_slice().to_vec()).collect::<Vec<_>>();
    assert_eq!(items(&s), [&b"xxx"[..], b"b", b"c", b"d", b"yy"]);
    assert_eq!(s.value_bytes(), 3 + 1 + 1 + 1 + 2);
    s.edit_list(b"l", |l| l.remove_positions(&[1, 3])).unwrap();
    assert_eq!(items(&s), [&b"xxx"[..], b"c", b"yy"]);
    s.edit_list(b"l", |l| l.keep(1..2)).unwrap();
    assert_eq!((items(&s), s.value_bytes()), (vec![b"c".to_vec()], 1));
    s.edit_list(b"l", |l| l.keep(0..0)).unwrap();
    assert!(s.get(b"l").is_none() && s.is_empty() && s.data_bytes() == 0, "the key goes with its last element");
}
