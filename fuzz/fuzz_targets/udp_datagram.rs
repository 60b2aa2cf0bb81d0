//! Arbitrary datagrams into the UDP datapath's receive-side check
//! (`udp::__fuzz::check_datagram`, which calls `read_packet_header`), with
//! arbitrary byte counts, `msg_flags` and `max_payload`, against a model of
//! the rule in the `udp` module docs.
//!
//! Input: `max_payload` (u16 LE), `len` as the kernel would return it (u16
//! LE), a flags byte (bit 0: `MSG_TRUNC`, bit 1: `MSG_CTRUNC`), then the
//! receive buffer's bytes. `len` may exceed the buffer, which the kernel
//! never does; the check must still not panic.
#![no_main]

use cornflakes_datapath::udp::__fuzz::check_datagram;
use cornflakes_datapath::{read_packet_header, PACKET_HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let max_payload = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let len = usize::from(u16::from_le_bytes([data[2], data[3]]));
    let mut msg_flags = 0;
    if data[4] & 1 != 0 {
        msg_flags |= libc::MSG_TRUNC;
    }
    if data[4] & 2 != 0 {
        msg_flags |= libc::MSG_CTRUNC;
    }
    let buf = &data[5..];

    // The header parser alone, against its definition.
    let header = read_packet_header(buf);
    let well_formed = buf.len() >= PACKET_HEADER_LEN && buf[4..8] == [0; 4];
    assert_eq!(header.is_some(), well_formed);
    if let Some(id) = header {
        assert_eq!(id, u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]));
    }

    // The receive-side check, against the rule: delivered exactly when not
    // truncated, within max_payload and the buffer, and well formed.
    let got = check_datagram(buf, len, msg_flags, max_payload);
    let deliver = msg_flags & libc::MSG_TRUNC == 0
        && len <= max_payload
        && len <= buf.len()
        && len >= PACKET_HEADER_LEN
        && buf[4..8] == [0; 4];
    assert_eq!(got.is_some(), deliver, "len {len} max_payload {max_payload} flags {msg_flags:#x}");
    if let Some(id) = got {
        assert_eq!(Some(id), read_packet_header(&buf[..len]));
        // What the receive path hands out: never out of bounds.
        let payload = &buf[PACKET_HEADER_LEN..len];
        assert_eq!(payload.len() + PACKET_HEADER_LEN, len);
    }
});
