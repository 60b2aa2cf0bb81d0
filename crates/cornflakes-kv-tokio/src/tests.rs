use cornflakes_kv::{Request, ResponseVals, Store};

use super::*;

fn pb_req(op: Op, keys: &[&[u8]], vals: &[&[u8]], index: u32) -> pb::KvRequest {
    pb::KvRequest {
        op: op as u32,
        keys: keys.iter().map(|k| Bytes::copy_from_slice(k)).collect(),
        vals: vals.iter().map(|v| Bytes::copy_from_slice(v)).collect(),
        index,
    }
}

/// The same request run by `cornflakes_kv::Store`, the reference.
fn reference(store: &mut Store, r: &pb::KvRequest) -> (Status, Vec<Vec<u8>>) {
    let req = Request {
        op: r.op,
        keys: r.keys.iter().map(|k| &k[..]).collect(),
        vals: r.vals.iter().map(|v| &v[..]).collect(),
        index: r.index,
    };
    let mut out = ResponseVals::new();
    let status = store.execute(&req, &mut out);
    (status, out.iter().map(|v| v.to_vec()).collect())
}

#[test]
fn the_store_answers_like_the_cornflakes_kv_store() {
    let limits = Limits { max_key: 8, max_value: 64, max_keys: 3, max_list: 3, max_response: 100 };
    let mut ours = ValueStore::new(limits);
    let mut theirs = Store::new(cornflakes::Pool::new().expect("pool"), limits);
    let big = [9u8; 65];
    let half = [3u8; 60];
    let requests = [
        pb_req(Op::Get, &[b"a"], &[], 0),
        pb_req(Op::Put, &[b"a"], &[b"one"], 0),
        pb_req(Op::Get, &[b"a"], &[], 0),
        pb_req(Op::Put, &[b"l"], &[b"x", b"yy"], 0),
        pb_req(Op::Get, &[b"l"], &[], 0),
        pb_req(Op::GetList, &[b"l"], &[], 0),
        pb_req(Op::GetFromList, &[b"l"], &[], 1),
        pb_req(Op::GetFromList, &[b"l"], &[], 2),
        pb_req(Op::Append, &[b"l"], &[b"zzz"], 0),
        pb_req(Op::Append, &[b"l"], &[b"w"], 0),
        pb_req(Op::Append, &[b"new"], &[b"w"], 0),
        pb_req(Op::GetM, &[b"a", b"new"], &[], 0),
        pb_req(Op::GetM, &[b"a", b"nope"], &[], 0),
        pb_req(Op::GetM, &[], &[], 0),
        pb_req(Op::GetM, &[b"a", b"a", b"a", b"a"], &[], 0),
        pb_req(Op::PutM, &[b"b", b"c"], &[b"B", b"C"], 0),
        pb_req(Op::PutM, &[b"b", b"c"], &[b"B"], 0),
        pb_req(Op::GetM, &[b"b", b"c"], &[], 0),
        pb_req(Op::Put, &[b""], &[b"v"], 0),
        pb_req(Op::Put, &[b"too-long-key"], &[b"v"], 0),
        pb_req(Op::Put, &[b"k"], &[&big], 0),
        pb_req(Op::Put, &[b"k"], &[], 0),
        pb_req(Op::Put, &[b"h1"], &[&half], 0),
        pb_req(Op::Put, &[b"h2"], &[&half], 0),
        pb_req(Op::GetM, &[b"h1", b"h2"], &[], 0),
        pb_req(Op::Echo, &[], &[b"e1", b"e2"], 0),
        pb::KvRequest { op: 99, ..Default::default() },
        pb::KvRequest { op: 0, ..Default::default() },
    ];
    for r in &requests {
        let (status, vals) = ours.execute(r);
        let vals: Vec<Vec<u8>> = vals.iter().map(|v| v.to_vec()).collect();
        assert_eq!((status, vals), reference(&mut theirs, r), "request {r:?}");
    }
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours.value_bytes(), theirs.value_bytes());
}

#[test]
fn replies_share_the_stored_bytes() {
    let mut store = ValueStore::default();
    store.insert_with(b"k", &[4096], |_, b| b.fill(5));
    let (status, first) = store.execute(&pb_req(Op::Get, &[b"k"], &[], 0));
    let (_, second) = store.execute(&pb_req(Op::Get, &[b"k"], &[], 0));
    assert_eq!(status, Status::Ok);
    assert_eq!(first[0].as_ptr(), second[0].as_ptr(), "a reference, not a copy");
    assert_eq!(&first[0][..], &[5u8; 4096][..]);
}

/// A request frame as the tcp datapath writes it.
fn frame(msg_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = msg_id.to_le_bytes().to_vec();
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

#[test]
fn frames_carry_the_datapath_header_both_ways() {
    let mut codec = KvFrames::default();
    let req = pb_req(Op::Echo, &[], &[b"hello"], 0).encode_to_vec();
    let mut wire = BytesMut::from(&frame(7, &req)[..]);
    wire.extend_from_slice(&frame(8, b"")[..5]);
    assert_eq!(codec.decode(&mut wire).unwrap(), Some((7, Bytes::from(req.clone()))));
    assert_eq!(codec.decode(&mut wire).unwrap(), None, "a partial header waits");
    wire.extend_from_slice(&frame(8, b"")[5..]);
    assert_eq!(codec.decode(&mut wire).unwrap(), Some((8, Bytes::new())), "an empty message");

    let mut store = ValueStore::default();
    let msg = handle(&mut store, Bytes::from(req)).expect("a request");
    let mut out = BytesMut::new();
    codec.encode(Response { msg_id: 7, msg: msg.clone() }, &mut out).unwrap();
    assert_eq!(&out[..], &frame(7, &msg.encode_to_vec())[..]);
    let back = pb::KvResponse::decode(&out[HEADER_LEN..]).unwrap();
    assert_eq!((back.status, back.vals), (0, vec![Bytes::from_static(b"hello")]));
}

#[test]
fn bad_input_is_refused_without_panicking() {
    let mut codec = KvFrames::new(1024);
    let mut wire = BytesMut::from(&[1, 0, 0, 0, 0x01, 0x04, 0, 0][..]);
    let err = codec.decode(&mut wire).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "a length over the limit");
    let mut store = ValueStore::default();
    assert!(handle(&mut store, Bytes::from_static(&[0xff, 0xff, 0xff])).is_none(), "not protobuf");
    let bad_key =
        pb::KvRequest { op: Op::Get as u32, keys: vec![Bytes::from_static(&[0xc3, 0x28])], ..Default::default() };
    assert!(handle(&mut store, Bytes::from(bad_key.encode_to_vec())).is_none(), "a key that is not UTF-8");
}
