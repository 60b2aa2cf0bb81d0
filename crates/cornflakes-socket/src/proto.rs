//! The frames between the preload library and the monitor.
//!
//! Every frame is exactly [`FRAME_LEN`] bytes; descriptors travel with it as
//! `SCM_RIGHTS`. IPv4 only for now (IPv6 sockets stay on the kernel).
//!
//! ```text
//!  0    1      2..4  4..8        8..10         10..12        12..16
//! ┌────┬──────┬─────┬───────────┬─────────────┬─────────────┬───────────┐
//! │ op │status│  0  │ dst ip BE │ dst port BE │ src port BE │ src ip BE │
//! └────┴──────┴─────┴───────────┴─────────────┴─────────────┴───────────┘
//! ```
//!
//! | op | from → to | fds | meaning |
//! |---|---|---|---|
//! | `Listen` | library → monitor | 1: the listening socket (checked: listening, bound to `dst`) | this Unix connection is the accept channel of a listener bound to `dst`; closing it (or the process dying) withdraws it |
//! | `Connect` | library → monitor | 3: ring the connector consumes, ring the acceptor consumes, the acceptor's end of the socket pair | connect `src` to `dst` |
//! | `Deliver` | monitor → listener's channel | the 3 of `Connect` | a new connection for `accept` |
//! | `Reply` | monitor → connector | none | `status` [`STATUS_OK`]: delivered; [`STATUS_NO_LISTENER`]: use the kernel |

use std::net::{Ipv4Addr, SocketAddrV4};

/// Bytes of every frame.
pub const FRAME_LEN: usize = 16;
/// Descriptors a `Connect` or `Deliver` frame carries.
pub const CONNECT_FDS: usize = 3;
/// `Reply` status: the connection was queued at the listener.
pub const STATUS_OK: u8 = 1;
/// `Reply` status: nobody listens there through the library (or its
/// channel is full): the connector uses the kernel, which answers as it
/// would anyway (`ECONNREFUSED`, or a listener not under the library).
pub const STATUS_NO_LISTENER: u8 = 0;

/// What a frame asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Register a listening address.
    Listen = 1,
    /// Connect to a listening address.
    Connect = 2,
    /// A connection for a listener.
    Deliver = 3,
    /// The monitor's answer to `Connect`.
    Reply = 4,
}

/// One decoded frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What it asks.
    pub op: Op,
    /// `Reply` status, 0 otherwise.
    pub status: u8,
    /// The listening (or connected-to) address.
    pub dst: SocketAddrV4,
    /// The connecting socket's address (`Connect`, `Deliver`).
    pub src: SocketAddrV4,
}

impl Frame {
    /// A frame with `op`, zero status and the two addresses.
    pub fn new(op: Op, dst: SocketAddrV4, src: SocketAddrV4) -> Self {
        Self { op, status: 0, dst, src }
    }

    /// The bytes on the wire.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_socket::proto::{Frame, Op};
    /// let f = Frame::new(Op::Connect, "127.0.0.1:80".parse().unwrap(), "127.0.0.1:4000".parse().unwrap());
    /// assert_eq!(Frame::decode(&f.encode()), Some(f));
    /// ```
    pub fn encode(&self) -> [u8; FRAME_LEN] {
        let mut b = [0u8; FRAME_LEN];
        b[0] = self.op as u8;
        b[1] = self.status;
        b[4..8].copy_from_slice(&self.dst.ip().octets());
        b[8..10].copy_from_slice(&self.dst.port().to_be_bytes());
        b[10..12].copy_from_slice(&self.src.port().to_be_bytes());
        b[12..16].copy_from_slice(&self.src.ip().octets());
        b
    }

    /// Parses untrusted bytes: `None` unless they are exactly one frame with
    /// a known op and zero padding.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let b: &[u8; FRAME_LEN] = b.try_into().ok()?;
        let op = match b[0] {
            1 => Op::Listen,
            2 => Op::Connect,
            3 => Op::Deliver,
            4 => Op::Reply,
            _ => return None,
        };
        if b[2] != 0 || b[3] != 0 {
            return None;
        }
        let dst = SocketAddrV4::new(Ipv4Addr::new(b[4], b[5], b[6], b[7]), u16::from_be_bytes([b[8], b[9]]));
        let src = SocketAddrV4::new(Ipv4Addr::new(b[12], b[13], b[14], b[15]), u16::from_be_bytes([b[10], b[11]]));
        Some(Self { op, status: b[1], dst, src })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let f = Frame {
            op: Op::Reply,
            status: STATUS_OK,
            dst: "10.1.2.3:65535".parse().unwrap(),
            src: "127.0.0.1:1".parse().unwrap(),
        };
        let b = f.encode();
        assert_eq!(Frame::decode(&b), Some(f));
        assert_eq!(Frame::decode(&b[..15]), None);
        let mut bad = b;
        bad[0] = 9;
        assert_eq!(Frame::decode(&bad), None);
        bad = b;
        bad[3] = 1;
        assert_eq!(Frame::decode(&bad), None);
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(Frame::decode(&long), None);
    }
}
