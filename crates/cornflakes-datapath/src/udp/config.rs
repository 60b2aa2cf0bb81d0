//! What a [`UdpDatapath`](super::UdpDatapath) is built from: the limits of
//! UDP over IPv4, the send modes, how completions are delivered, and
//! [`UdpConfig`] with the checks [`UdpDatapath::bind`](super::UdpDatapath::bind)
//! runs on it.

use std::time::Duration;

use cornflakes::{Pool, PoolConfig};

use super::BindError;
use crate::PACKET_HEADER_LEN;

/// Largest UDP payload over IPv4 (65535 - 20 - 8).
pub const MAX_UDP_PAYLOAD: usize = 65507;
/// UDP payload of one 1500-byte Ethernet frame over IPv4 (1500 - 20 - 8).
pub const ETHERNET_UDP_PAYLOAD: usize = 1472;
/// Most iovecs one `sendmsg` takes (`UIO_MAXIOV`).
pub const MAX_IOVECS: usize = 1024;

/// How sends reach the kernel; see the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendMode {
    /// Pick per message from what the kernel supports.
    #[default]
    Auto,
    /// Every message with `SENDMSG_ZC` (fails at bind without it).
    SendMsgZc,
    /// Single-segment messages with `SEND_ZC`, the others with plain
    /// `SENDMSG` (fails at bind without `SEND_ZC`).
    SendZc,
    /// Every message with plain `SENDMSG` (the kernel copies at send).
    SendMsg,
}

/// Where the kernel finishes receives and sends (io_uring "task work") and
/// how the datapath learns about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskRun {
    /// The kernel interrupts the thread (an IPI when it is running) to
    /// complete requests; completions appear in the queue by themselves.
    Signal,
    /// `IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG` (Linux 5.19): no
    /// interrupt; the kernel raises a flag and the datapath enters the
    /// kernel when it sees it while polling.
    #[default]
    Cooperative,
    /// `IORING_SETUP_DEFER_TASKRUN | SINGLE_ISSUER | TASKRUN_FLAG` (Linux
    /// 6.1): work runs only when the datapath enters the kernel, which it
    /// does when the flag is up or it waits.
    Deferred,
}

/// Configuration of a [`UdpDatapath`](super::UdpDatapath).
#[derive(Clone, Debug)]
pub struct UdpConfig {
    /// Use this pool (share it with the application); when `None`, a pool
    /// is created from `pool_config`.
    pub pool: Option<Pool>,
    /// Configuration of the pool created when `pool` is `None`.
    pub pool_config: PoolConfig,
    /// Submission queue entries (rounded up to a power of two by the
    /// kernel). Default 256.
    pub sq_entries: u32,
    /// Completion queue entries; 0 picks enough for every send (two
    /// completions each) and receive in flight. Default 0.
    pub cq_entries: u32,
    /// Most receive buffers the datapath holds, each a pool buffer of
    /// `max_payload + 1` bytes: receives posted to the kernel plus messages
    /// received but not yet taken by
    /// [`Datapath::recv_batch`](crate::Datapath::recv_batch). Between 1 and
    /// this many receives are posted, adapting to the traffic, and none
    /// while this many messages await the application (see the module
    /// docs). Default 32.
    pub recv_buffers: usize,
    /// Sends in flight (awaiting completion or notification) before
    /// [`SendError::Full`](crate::SendError::Full). Default 256.
    pub max_in_flight: usize,
    /// Most segments (iovecs) in one message, at most [`MAX_IOVECS`].
    /// Default 64.
    pub max_segments: usize,
    /// Most bytes of one datagram's UDP payload: packet header plus
    /// message. Default [`ETHERNET_UDP_PAYLOAD`]; up to
    /// [`MAX_UDP_PAYLOAD`] (loopback).
    pub max_payload: usize,
    /// Lower the limit for a peer registered with
    /// [`UdpDatapath::connect`](super::UdpDatapath::connect) to its route's
    /// MTU (`IP_MTU`). Default true.
    pub probe_path_mtu: bool,
    /// Learn peers from received datagrams. Default true.
    pub learn_peers: bool,
    /// Most learned peers; datagrams from further addresses are dropped.
    /// Default 4096.
    pub max_peers: usize,
    /// How to send. Default [`SendMode::Auto`].
    pub send_mode: SendMode,
    /// Register the pool as io_uring fixed buffers. Default true. A kernel
    /// that refuses the registration is not an error: sends then go
    /// without fixed buffers (see
    /// [`UdpDatapath::fixed_buffers`](super::UdpDatapath::fixed_buffers)).
    pub register_buffers: bool,
    /// Socket buffer sizes to request (`SO_RCVBUF`, `SO_SNDBUF`; capped by
    /// the kernel's maxima); 0 keeps the defaults. Default 4 MiB.
    pub socket_buffer: usize,
    /// How long [`Datapath::wait`](crate::Datapath::wait) spins on the
    /// completion queue before sleeping in the kernel. Default 0.
    pub busy_poll: Duration,
    /// How completions reach the datapath. Default
    /// [`TaskRun::Cooperative`]; falls back to [`TaskRun::Signal`] on
    /// kernels without it.
    pub task_run: TaskRun,
}

impl Default for UdpConfig {
    fn default() -> Self {
        Self {
            pool: None,
            pool_config: PoolConfig::default(),
            sq_entries: 256,
            cq_entries: 0,
            recv_buffers: 32,
            max_in_flight: 256,
            max_segments: 64,
            max_payload: ETHERNET_UDP_PAYLOAD,
            probe_path_mtu: true,
            learn_peers: true,
            max_peers: 4096,
            send_mode: SendMode::Auto,
            register_buffers: true,
            socket_buffer: 4 << 20,
            busy_poll: Duration::ZERO,
            task_run: TaskRun::default(),
        }
    }
}

impl UdpConfig {
    /// Defaults, with datagrams up to [`MAX_UDP_PAYLOAD`] (for loopback).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, MAX_UDP_PAYLOAD};
    ///
    /// let config = UdpConfig { recv_buffers: 8, ..UdpConfig::loopback() };
    /// assert_eq!(config.max_payload, MAX_UDP_PAYLOAD);
    /// ```
    pub fn loopback() -> Self {
        Self { max_payload: MAX_UDP_PAYLOAD, ..Self::default() }
    }

    /// Rejects configurations [`UdpDatapath::bind`](super::UdpDatapath::bind)
    /// cannot honour, saying which field to change.
    pub(super) fn check(&self) -> Result<(), BindError> {
        let bad = |what: &'static str| Err(BindError::Config(what));
        if self.max_payload <= PACKET_HEADER_LEN || self.max_payload > MAX_UDP_PAYLOAD {
            return bad("max_payload must be between 9 and 65507");
        }
        if self.recv_buffers == 0 || self.max_in_flight == 0 {
            return bad("recv_buffers and max_in_flight must be positive");
        }
        if self.max_segments == 0 || self.max_segments > MAX_IOVECS {
            return bad("max_segments must be between 1 and 1024");
        }
        if (self.sq_entries as usize) <= self.recv_buffers {
            return bad("sq_entries must exceed recv_buffers");
        }
        if self.max_in_flight >= 1 << 24 || self.recv_buffers >= 1 << 24 {
            return bad("max_in_flight and recv_buffers must be below 2^24");
        }
        Ok(())
    }

    /// Completion queue entries: `cq_entries`, or enough for every send
    /// (two completions each) and receive in flight.
    pub(super) fn cq_entries(&self) -> u32 {
        if self.cq_entries > 0 {
            self.cq_entries
        } else {
            ((2 * self.max_in_flight + self.recv_buffers + 64).next_power_of_two() as u32).max(self.sq_entries)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_checked() {
        assert!(UdpConfig { max_payload: 8, ..UdpConfig::default() }.check().is_err());
        assert!(UdpConfig { max_payload: 65508, ..UdpConfig::default() }.check().is_err());
        assert!(UdpConfig { max_segments: 0, ..UdpConfig::default() }.check().is_err());
        assert!(UdpConfig { recv_buffers: 300, ..UdpConfig::default() }.check().is_err());
        assert!(UdpConfig::loopback().check().is_ok());
    }
}
