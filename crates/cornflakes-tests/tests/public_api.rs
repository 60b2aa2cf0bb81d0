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
