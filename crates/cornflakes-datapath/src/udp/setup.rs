//! Creating and tearing down a [`UdpDatapath`]: probing the kernel, the
//! pool, the socket and its options, the ring (with a fallback when the
//! requested task-run mode is refused), the fixed-buffer registration and
//! the slots; and, on drop, cancelling what the kernel still holds and
//! waiting for it, so that it never touches memory that is reused.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use cornflakes::Pool;
use io_uring::{opcode, IoUring};

use super::completion::{user_data, KIND_CANCEL, KIND_RECV};
use super::fixed::FixedBuffers;
use super::peers::PeerTable;
use super::recv::RecvSlot;
use super::send::SendSlot;
use super::{sys, BindError, KernelSupport, SendMode, TaskRun, UdpConfig, UdpDatapath, UdpStats};
use crate::DatapathStats;

impl UdpDatapath {
    /// Binds a UDP socket at `local` (port 0 picks a free one), creates
    /// the ring, registers the pool as fixed buffers and posts the first
    /// receive.
    ///
    /// # Errors
    ///
    /// [`BindError::Config`] for a configuration out of range,
    /// [`BindError::Unsupported`] when a forced [`SendMode`] needs an
    /// operation the running kernel lacks, [`BindError::Pool`],
    /// [`BindError::Socket`], [`BindError::Ring`] and
    /// [`BindError::PostReceives`] when the pool, the socket or io_uring
    /// cannot be set up. A kernel that refuses fixed buffers or
    /// cooperative task running is not an error (see [`BindError`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{BindError, UdpConfig, UdpDatapath};
    ///
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// assert_ne!(dp.local_addr().port(), 0);
    ///
    /// let bad = UdpConfig { max_payload: 4, ..UdpConfig::loopback() };
    /// assert!(matches!(UdpDatapath::bind("127.0.0.1:0".parse()?, bad), Err(BindError::Config(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind(local: SocketAddr, mut config: UdpConfig) -> Result<Self, BindError> {
        config.check()?;
        let support = KernelSupport::probe();
        match config.send_mode {
            SendMode::SendMsgZc if !support.sendmsg_zc => {
                return Err(BindError::Unsupported { mode: config.send_mode, needs: "SENDMSG_ZC (Linux 6.1)" });
            }
            SendMode::SendZc if !support.send_zc => {
                return Err(BindError::Unsupported { mode: config.send_mode, needs: "SEND_ZC (Linux 6.0)" });
            }
            _ => {}
        }
        let pool = match config.pool.take() {
            Some(p) => p,
            None => Pool::with_config(config.pool_config.clone()).map_err(BindError::Pool)?,
        };
        let socket_error = |error| BindError::Socket { addr: local, error };
        let socket = UdpSocket::bind(local).map_err(socket_error)?;
        let local = socket.local_addr().map_err(socket_error)?;
        if config.socket_buffer > 0 {
            // Best effort: the kernel caps these at net.core.{r,w}mem_max.
            let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&socket, config.socket_buffer);
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(&socket, config.socket_buffer);
        }
        let rxq_ovfl = sys::enable_rxq_ovfl(&socket);
        let ring = build_ring(&mut config).map_err(BindError::Ring)?;
        let fixed = FixedBuffers::new(&ring, &pool, config.register_buffers);

        let recv_slots = (0..config.recv_buffers).map(|_| RecvSlot::new()).collect();
        let send_slots = (0..config.max_in_flight).map(|_| SendSlot::new(config.max_segments)).collect();
        let mut this = Self {
            ring,
            recv_slots,
            send_slots,
            socket,
            fixed,
            pool,
            free_sends: (0..config.max_in_flight as u32).rev().collect(),
            idle_recvs: (0..config.recv_buffers as u32).rev().collect(),
            ready: VecDeque::with_capacity(config.recv_buffers),
            peers: PeerTable::new(config.learn_peers, config.max_peers, config.max_payload),
            recv_len: config.max_payload + 1,
            config,
            support,
            local,
            rxq_ovfl,
            recv_posted: 0,
            recv_target: 1,
            recv_done: 0,
            recv_unsubmitted: 0,
            in_flight: 0,
            released: 0,
            closing: false,
            waker: Default::default(),
            cqes: Vec::with_capacity(256),
            last_send_error: None,
            stats: DatapathStats::default(),
            udp_stats: UdpStats::default(),
        };
        this.udp_stats.fixed_buffer_updates = this.fixed.updates;
        this.post_idle_recvs();
        this.submit().map_err(BindError::PostReceives)?;
        Ok(this)
    }
}

/// The ring for `config`, with its task-run mode; falls back to
/// [`TaskRun::Signal`] (and records it in `config`) when the kernel
/// refuses the requested one.
fn build_ring(config: &mut UdpConfig) -> std::io::Result<IoUring> {
    let cq = config.cq_entries();
    let mut builder = IoUring::builder();
    builder.setup_cqsize(cq).setup_submit_all();
    match config.task_run {
        TaskRun::Signal => {}
        TaskRun::Cooperative => {
            builder.setup_coop_taskrun().setup_taskrun_flag();
        }
        TaskRun::Deferred => {
            builder.setup_defer_taskrun().setup_single_issuer().setup_taskrun_flag();
        }
    }
    match builder.build(config.sq_entries) {
        Ok(r) => Ok(r),
        Err(_) => {
            config.task_run = TaskRun::Signal;
            IoUring::builder().setup_cqsize(cq).build(config.sq_entries)
        }
    }
}

impl Drop for UdpDatapath {
    /// Cancels the posted receives and waits (up to two seconds) for every
    /// request to complete, so that the kernel never writes into or reads
    /// from memory that is reused; whatever is still owned by the kernel
    /// after that is leaked instead of freed.
    fn drop(&mut self) {
        self.closing = true;
        for i in 0..self.recv_slots.len() {
            if !self.recv_slots[i].posted {
                continue;
            }
            let entry = opcode::AsyncCancel::new(user_data(KIND_RECV, i)).build().user_data(user_data(KIND_CANCEL, i));
            // SAFETY: a cancel request points at no memory.
            while !unsafe { sys::push(&mut self.ring, &entry) } {
                if self.submit().is_err() {
                    break;
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let _ = self.submit();
            self.reap();
            if self.recv_posted == 0 && self.in_flight == 0 {
                return;
            }
            if Instant::now() >= deadline {
                break;
            }
            self.wait_briefly(Duration::from_millis(10));
        }
        // The kernel still owns some requests: leak what they point at.
        std::mem::forget(std::mem::take(&mut self.recv_slots));
        std::mem::forget(std::mem::take(&mut self.send_slots));
    }
}
