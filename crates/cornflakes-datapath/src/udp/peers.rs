//! Peers: remote addresses numbered as [`ConnId`]s.
//!
//! [`PeerTable`] owns the numbering. A peer is registered explicitly
//! ([`UdpDatapath::connect`](super::UdpDatapath::connect), with its message
//! limit lowered to the route's MTU when asked) or learned from the source
//! address of a received datagram, up to
//! [`UdpConfig::max_peers`](super::UdpConfig::max_peers) learned ones. Ids
//! are indices and never reused; the last sender is cached, since
//! consecutive datagrams usually come from the same peer.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};

use super::sys::RawAddr;
use super::MAX_UDP_PAYLOAD;
use crate::ConnId;

/// One remote address, with what a send to it needs.
#[derive(Clone, Copy)]
pub(super) struct Peer {
    pub(super) addr: SocketAddr,
    /// The address in kernel layout, copied into each send slot.
    pub(super) raw: RawAddr,
    /// Most bytes of packet header plus message for this peer.
    pub(super) max_payload: usize,
}

/// Every peer known to one datapath.
pub(super) struct PeerTable {
    peers: Vec<Peer>,
    ids: HashMap<SocketAddr, ConnId>,
    /// The sender of the last datagram, checked before the map.
    last: Option<(SocketAddr, ConnId)>,
    learned: usize,
    /// Whether unknown senders are learned, and how many at most.
    learn: bool,
    max_learned: usize,
    /// The message limit of a learned peer.
    default_max_payload: usize,
}

impl PeerTable {
    pub(super) fn new(learn: bool, max_learned: usize, default_max_payload: usize) -> Self {
        Self { peers: Vec::new(), ids: HashMap::new(), last: None, learned: 0, learn, max_learned, default_max_payload }
    }

    /// The peer numbered `conn`.
    #[inline]
    pub(super) fn get(&self, conn: ConnId) -> Option<&Peer> {
        self.peers.get(conn.0 as usize)
    }

    /// Registers `addr` (or returns its existing id). With `probe_mtu`, the
    /// peer's limit is lowered to what its route carries.
    pub(super) fn connect(&mut self, addr: SocketAddr, probe_mtu: bool) -> ConnId {
        if let Some(&id) = self.ids.get(&addr) {
            return id;
        }
        let mut max_payload = self.default_max_payload;
        if probe_mtu {
            if let Some(path) = path_max_payload(addr) {
                max_payload = max_payload.min(path);
            }
        }
        self.add(addr, max_payload)
    }

    fn add(&mut self, addr: SocketAddr, max_payload: usize) -> ConnId {
        let id = ConnId(self.peers.len() as u32);
        self.peers.push(Peer { addr, raw: RawAddr::new(&addr), max_payload });
        self.ids.insert(addr, id);
        id
    }

    /// The id of the sender `from`, learning it when allowed and there is
    /// room; `None` means drop the datagram.
    #[inline]
    pub(super) fn sender(&mut self, from: SocketAddr) -> Option<ConnId> {
        if let Some((addr, id)) = self.last {
            if addr == from {
                return Some(id);
            }
        }
        let id = match self.ids.get(&from) {
            Some(&id) => id,
            None => {
                if !self.learn || self.learned >= self.max_learned {
                    return None;
                }
                self.learned += 1;
                self.add(from, self.default_max_payload)
            }
        };
        self.last = Some((from, id));
        Some(id)
    }
}

/// The largest UDP payload the route to `peer` carries (`IP_MTU` of a
/// socket connected to it, minus IP and UDP headers).
fn path_max_payload(peer: SocketAddr) -> Option<usize> {
    let (any, overhead): (SocketAddr, usize) = match peer {
        SocketAddr::V4(_) => (SocketAddr::from(([0, 0, 0, 0], 0)), 28),
        SocketAddr::V6(_) => (SocketAddr::from(([0u16; 8], 0)), 48),
    };
    let s = UdpSocket::bind(any).ok()?;
    s.connect(peer).ok()?;
    let mtu = match peer {
        SocketAddr::V4(_) => rustix::net::sockopt::ip_mtu(&s).ok()?,
        SocketAddr::V6(_) => rustix::net::sockopt::ipv6_mtu(&s).ok()?,
    } as usize;
    Some(mtu.checked_sub(overhead)?.min(MAX_UDP_PAYLOAD))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_up_to_the_limit_and_keeps_ids() {
        let mut t = PeerTable::new(true, 2, 1000);
        let a: SocketAddr = "192.0.2.1:1".parse().unwrap();
        let b: SocketAddr = "192.0.2.2:2".parse().unwrap();
        let c: SocketAddr = "192.0.2.3:3".parse().unwrap();
        assert_eq!(t.sender(a), Some(ConnId(0)));
        assert_eq!(t.sender(b), Some(ConnId(1)));
        assert_eq!(t.sender(a), Some(ConnId(0)));
        assert_eq!(t.sender(c), None, "a third learned peer is over the limit");
        assert_eq!(t.connect(c, false), ConnId(2), "explicit peers do not count");
        assert_eq!(t.sender(c), Some(ConnId(2)));
        assert_eq!(t.get(ConnId(1)).map(|p| (p.addr, p.max_payload)), Some((b, 1000)));
        let mut closed = PeerTable::new(false, 2, 1000);
        assert_eq!(closed.sender(a), None);
    }
}
