//! Why a [`UdpDatapath`](super::UdpDatapath) could not be created.
//!
//! Only set-up has its own error: it runs once, so its error carries the
//! cause and says what to change. The hot paths keep the crate's cheap
//! [`SendError`](crate::SendError) and [`RecvError`](crate::RecvError)
//! (back-pressure is a unit variant; the kernel's refusals an errno).

use std::io;
use std::net::SocketAddr;

use cornflakes::mem::PoolError;

use super::SendMode;

/// Why [`UdpDatapath::bind`](super::UdpDatapath::bind) failed.
///
/// A kernel that refuses to register the pool as fixed buffers is not an
/// error (sends then go without them); neither is one without cooperative
/// task running (the datapath falls back to [`TaskRun::Signal`](super::TaskRun::Signal)).
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// A field of [`UdpConfig`](super::UdpConfig) is out of range.
    #[error("invalid UdpConfig: {0}")]
    Config(&'static str),
    /// The forced [`SendMode`] needs an io_uring operation this kernel
    /// lacks.
    #[error("send mode {mode:?} needs {needs}, which this kernel's io_uring lacks; use SendMode::Auto")]
    Unsupported {
        /// The mode asked for.
        mode: SendMode,
        /// The operation it needs, with the first Linux version that has it.
        needs: &'static str,
    },
    /// The pool could not be created from
    /// [`UdpConfig::pool_config`](super::UdpConfig::pool_config).
    #[error("cannot create the datapath's pool: {0}")]
    Pool(PoolError),
    /// The UDP socket could not be bound (or its address read back).
    #[error("cannot bind a UDP socket at {addr}: {error} (is the address local and the port free?)")]
    Socket {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        error: io::Error,
    },
    /// The io_uring instance could not be created.
    #[error(
        "cannot create an io_uring: {0} (needs Linux 5.19 or later with io_uring enabled: see \
         /proc/sys/kernel/io_uring_disabled, seccomp filters and RLIMIT_MEMLOCK)"
    )]
    Ring(io::Error),
    /// The first receives could not be submitted to the ring.
    #[error("cannot submit the first receives to io_uring: {0}")]
    PostReceives(io::Error),
}
