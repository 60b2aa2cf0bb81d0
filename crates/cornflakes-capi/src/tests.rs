//! The API from Rust, as C would call it: null handles, bad input, and a
//! request and response round trip without a datapath.

use std::ptr::{null, null_mut};

use cornflakes::{Arena, Message};
use cornflakes_kv::kv_proto::{KvRequest, KvResponse};

use super::*;

fn last_error() -> String {
    // SAFETY: cf_last_error returns a NUL-terminated thread-local string.
    unsafe { CStr::from_ptr(cf_last_error()) }.to_string_lossy().into_owned()
}

#[test]
fn null_handles_are_errors_not_crashes() {
    let mut buf: *mut CfBufMut = null_mut();
    // SAFETY: NULLs are what is tested; every other pointer is valid.
    unsafe {
        assert_eq!(cf_buf_alloc(null(), 16, &mut buf), CF_ERR_NULL);
        assert!(last_error().contains("pool is NULL"), "{}", last_error());
        assert_eq!(cf_kv_request_set_op(null_mut(), 1), CF_ERR_NULL);
        assert_eq!(cf_kv_request_add_key(null_mut(), b"k".as_ptr(), 1), CF_ERR_NULL);
        let req = cf_kv_request_new();
        assert_eq!(cf_kv_request_add_key(req, null(), 3), CF_ERR_NULL);
        assert_eq!(cf_kv_request_add_key(req, null(), 0), CF_OK, "an empty key needs no pointer");
        assert_eq!(cf_kv_response_decode(null(), null_mut()), CF_ERR_NULL);
        let mut out: *mut CfConn = null_mut();
        assert_eq!(cf_conn_connect_shm(null(), &mut out), CF_ERR_NULL);
        assert_eq!(cf_conn_connect_tcp(c"not an address".as_ptr(), &mut out), CF_ERR_INVALID);
        assert!(out.is_null());
        // Getters and frees take NULL quietly.
        assert_eq!((cf_buf_len(null()), cf_kv_response_num_vals(null()), cf_kv_request_op(null())), (0, 0, 0));
        cf_buf_free(null_mut());
        cf_conn_close(null_mut());
        cf_kv_request_free(req);
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri has no Unix-domain sockets")]
fn nobody_listening_is_an_io_error_that_says_what_to_do() {
    let mut out: *mut CfConn = null_mut();
    // SAFETY: valid pointers.
    let status = unsafe { cf_conn_connect_shm(c"/nonexistent/cf.sock".as_ptr(), &mut out) };
    assert_eq!(status, CF_ERR_IO);
    assert!(last_error().contains("cf kv-server --addr /nonexistent/cf.sock"), "{}", last_error());
}

#[test]
fn a_request_serializes_to_what_rust_decodes_and_a_response_decodes_from_what_rust_encodes() {
    // SAFETY: every handle below is made here and freed once.
    unsafe {
        let mut pool: *mut CfPool = null_mut();
        assert_eq!(cf_pool_new(&mut pool), CF_OK);
        let mut arena: *mut CfArena = null_mut();
        assert_eq!(cf_arena_new_with_threshold(pool, 512, &mut arena), CF_OK);
        assert_eq!(cf_arena_threshold(arena), 512);
        // A 4 KiB value in a pool buffer (zero-copy) and a small copied one.
        let mut big: *mut CfBufMut = null_mut();
        assert_eq!(cf_buf_alloc(pool, 4096, &mut big), CF_OK);
        std::slice::from_raw_parts_mut(cf_bufmut_data(big), cf_bufmut_len(big)).fill(0xAB);
        let mut frozen: *mut CfBuf = null_mut();
        assert_eq!(cf_bufmut_freeze(big, &mut frozen), CF_OK);
        let req = cf_kv_request_new();
        assert_eq!(cf_kv_request_set_op(req, 2), CF_OK);
        assert_eq!(cf_kv_request_add_key(req, b"user:1".as_ptr(), 6), CF_OK);
        assert_eq!(cf_kv_request_add_val_buf(req, frozen), CF_OK);
        cf_buf_free(frozen); // the request keeps its own reference
        assert_eq!(cf_kv_request_add_val_copy(req, b"small".as_ptr(), 5), CF_OK);
        assert_eq!((cf_kv_request_num_keys(req), cf_kv_request_num_vals(req)), (1, 2));
        let mut wire: *mut CfBuf = null_mut();
        assert_eq!(cf_kv_request_serialize(req, arena, pool, &mut wire), CF_OK);
        let bytes = std::slice::from_raw_parts(cf_buf_data(wire), cf_buf_len(wire));
        let decode_arena = Arena::copying();
        let msg = KvRequest::deserialize_from_slice(bytes, &decode_arena).expect("Rust decodes what C built");
        assert_eq!(msg.get_op(), 2);
        assert_eq!(msg.get_keys()[0].as_bytes(), b"user:1");
        assert_eq!(msg.get_vals()[0].as_bytes(), &[0xAB; 4096][..]);
        assert_eq!(msg.get_vals()[1].as_bytes(), b"small");
        cf_buf_free(wire);

        // A response built by Rust, decoded through the C API.
        let rust_arena = Arena::copying();
        let mut resp = KvResponse::new_in(&rust_arena);
        resp.set_status(0);
        resp.init_vals(2);
        resp.append_vals(b"first");
        resp.append_vals(&[7u8; 700]);
        let encoded = resp.serialize_to_vec().unwrap();
        let mut pkt = (*pool).0.alloc(encoded.len()).unwrap();
        pkt.as_mut_slice().copy_from_slice(&encoded);
        let packet = Box::into_raw(Box::new(CfBuf(pkt.freeze())));
        let mut decoded: *mut CfKvResponse = null_mut();
        assert_eq!(cf_kv_response_decode(packet, &mut decoded), CF_OK);
        cf_buf_free(packet); // the response keeps the packet alive
        assert_eq!((cf_kv_response_status(decoded), cf_kv_response_num_vals(decoded)), (0, 2));
        let (mut p, mut n) = (null(), 0usize);
        assert_eq!(cf_kv_response_val(decoded, 1, &mut p, &mut n), CF_OK);
        assert_eq!(std::slice::from_raw_parts(p, n), &[7u8; 700][..]);
        assert_eq!(cf_kv_response_val(decoded, 2, &mut p, &mut n), CF_ERR_INVALID);
        assert_eq!(cf_kv_response_val(decoded, 0, null_mut(), &mut n), CF_ERR_NULL);
        cf_kv_response_free(decoded);

        // Garbage is a decode error.
        let mut junk = (*pool).0.alloc(3).unwrap();
        junk.as_mut_slice().copy_from_slice(&[0xFF, 0xFF, 0xFF]);
        let junk = Box::into_raw(Box::new(CfBuf(junk.freeze())));
        assert_eq!(cf_kv_response_decode(junk, &mut decoded), CF_ERR_DECODE);
        cf_buf_free(junk);

        cf_kv_request_free(req);
        cf_arena_free(arena);
        cf_pool_free(pool);
    }
}
