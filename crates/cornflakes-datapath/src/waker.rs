//! Waking a datapath that sleeps in [`Datapath::wait`](crate::Datapath::wait)
//! from another thread, as `mio::Waker` does for a poll: an eventfd of the
//! datapath's own, which its sleep watches (`poll` for shm, a multishot
//! poll request in the ring for udp and tcp).

use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::event::{eventfd, EventfdFlags};

/// Wakes a datapath sleeping in [`Datapath::wait`](crate::Datapath::wait)
/// from another thread, e.g. a control thread that has set a flag the
/// serving loop should look at now rather than after the wait's timeout.
/// From [`ShmDatapath::waker`](crate::shm::ShmDatapath::waker),
/// [`UdpDatapath::waker`](crate::udp::UdpDatapath::waker) or
/// [`TcpDatapath::waker`](crate::tcp::TcpDatapath::waker).
///
/// A wake-up is never lost: one given while the datapath is not waiting
/// makes its next wait return at once.
#[derive(Clone, Debug)]
pub struct Waker {
    fd: Arc<OwnedFd>,
}

impl Waker {
    /// Makes the datapath's current or next `wait` return (with `true`).
    ///
    /// # Errors
    ///
    /// The `write` of the eventfd failed (it cannot overflow: the count
    /// is reset at each wake-up).
    pub fn wake(&self) -> std::io::Result<()> {
        rustix::io::write(&*self.fd, &1u64.to_ne_bytes())?;
        Ok(())
    }
}

/// A datapath's side of its [`Waker`]s: the eventfd, made on first use.
#[derive(Debug, Default)]
pub(crate) struct WakerFd {
    fd: Option<Arc<OwnedFd>>,
}

impl WakerFd {
    /// A [`Waker`] for this eventfd (made by the first call).
    pub(crate) fn waker(&mut self) -> std::io::Result<Waker> {
        if let Some(fd) = &self.fd {
            return Ok(Waker { fd: fd.clone() });
        }
        let fd = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
        self.fd = Some(fd.clone());
        Ok(Waker { fd })
    }

    /// The eventfd, once a waker has been made.
    pub(crate) fn fd(&self) -> Option<&Arc<OwnedFd>> {
        self.fd.as_ref()
    }

    /// Resets the count after a wake-up was seen (non-blocking: nothing
    /// to read is fine).
    pub(crate) fn reset(&self) {
        if let Some(fd) = &self.fd {
            let _ = rustix::io::read(&**fd, &mut [0u8; 8]);
        }
    }
}
