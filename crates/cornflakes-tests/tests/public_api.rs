//! What an application sees of generated code: the `Message` trait in scope
//! is all it imports (the plumbing in `cornflakes::__private` is never
//! named), and proto names in other cases become Rust names as prost-build
//! makes them.

use cornflakes::{Arena, Message, Pool};
use cornflakes_tests::example::{http_server::TlsConfig, GetM, HttpServer};

#[test]
fn message_in_scope_is_all_a_transmit_path_needs() {
    let pool = Pool::new().unwrap();
    let value = pool.alloc_copy(&[7u8; 4096]).unwrap();
    let arena = Arena::new(&pool);
    let mut m = GetM::new_in(&arena);
    m.set_id(1);
    m.append_keys("user:42");
    m.append_vals(&value);

    let layout = m.layout();
    assert_eq!(layout.zero_copy_entries, 1);
    let mut first = vec![0u8; layout.first_segment_len()];
    m.write_header_and_copies(&layout, &mut first).unwrap();
    let mut wire = first;
    m.for_each_zero_copy(|buf| wire.extend_from_slice(buf));
    assert_eq!(wire, m.serialize_to_vec().unwrap());

    let pkt = pool.alloc_copy(&wire).unwrap();
    let back = GetM::deserialize(&pkt, &arena).unwrap();
    assert_eq!(back, m);
    assert_eq!(back.get_keys()[0].as_str().unwrap(), "user:42");
    assert!(back.get_vals()[0].is_zero_copy());
}

#[test]
fn names_are_converted_as_prost_converts_them() {
    let arena = Arena::copying();
    let mut server = HttpServer::new_in(&arena);
    server.set_max_conns(64);
    let mut tls = TlsConfig::new_in(&arena);
    tls.set_cert_pem(b"-----BEGIN CERTIFICATE-----");
    server.set_tls_config(tls);

    let bytes = server.serialize_to_vec().unwrap();
    let back = HttpServer::deserialize_from_slice(&bytes, &arena).unwrap();
    assert_eq!(back.get_max_conns(), 64);
    assert_eq!(back.get_tls_config().unwrap().get_cert_pem().as_bytes(), b"-----BEGIN CERTIFICATE-----");
}

/// Issue 11: the borrow checker paths a prost user expects. A setter given
/// a temporary (`&format!(..)`), a helper that builds a message from a local
/// `String`, and a decoded message returned from the function that received
/// its packet.
#[test]
fn owned_paths_compile_and_work() {
    use cornflakes::RcBuf;
    use cornflakes_tests::example::GetMOwned;

    fn build<'a>(arena: &'a Arena, id: u32) -> GetM<'a> {
        let key = format!("user:{id}"); // a local: dropped when we return
        let mut m = GetM::new_in(arena);
        m.set_id(id);
        m.append_keys_copied(&key);
        m.append_keys_copied(&format!("tmp:{id}"));
        m
    }

    // Receives a packet and returns the decoded message with it.
    fn receive(pool: &Pool, wire: &[u8]) -> GetMOwned {
        let pkt: RcBuf = pool.alloc_copy(wire).unwrap();
        GetMOwned::decode(pkt, Arena::new(pool)).unwrap()
    }

    let pool = Pool::new().unwrap();
    let arena = Arena::new(&pool);
    let m = build(&arena, 42);
    let value = pool.alloc_copy(&[5u8; 1000]).unwrap();
    let mut inner = cornflakes_tests::example::Inner::new_in(&arena);
    inner.set_data_buf(value.clone()); // adopted: zero-copy
    assert!(inner.get_data().is_zero_copy());
    inner.set_data_owned(vec![1, 2, 3]); // copied into the arena
    assert_eq!(inner.get_data().as_bytes(), [1, 2, 3]);

    let owned = receive(&pool, &m.serialize_to_vec().unwrap());
    let keys: Vec<String> = owned.with(|d| d.get_keys().iter().map(|k| k.as_str().unwrap().to_owned()).collect());
    assert_eq!(keys, ["user:42", "tmp:42"]);
    assert!(owned.with(|d| *d == m));
    let mut queue = vec![owned]; // stored like any other owned value
    let (pkt, mut arena2) = queue.pop().unwrap().into_parts();
    assert!(!pkt.is_empty());
    arena2.reset();
}

/// `get_mut_x()` used only to read a list leaves the message unchanged.
#[test]
fn reading_through_get_mut_does_not_mark_present() {
    let arena = Arena::copying();
    let mut m = GetM::new_in(&arena);
    let before = m.serialize_to_vec().unwrap();
    assert!(m.get_mut_keys().is_empty());
    assert!(!m.has_keys());
    assert_eq!(m.serialize_to_vec().unwrap(), before);
    // proto3 defaults are not sent.
    m.set_id(0);
    assert!(!m.has_id());
    assert_eq!(m.serialize_to_vec().unwrap(), before);
    // Debug shows the fields, as prost's does, and no internals.
    m.set_id(7);
    let text = format!("{m:?}");
    assert!(text.starts_with("GetM { id: 7, keys: "), "{text}");
    assert!(!text.contains("__cf"), "{text}");
}
