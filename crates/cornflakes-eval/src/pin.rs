//! Pinning the current thread to one core, so that benchmark runs do not
//! migrate (and, with two processes, do not share a core).

use rustix::thread::{sched_setaffinity, CpuSet};

use crate::Error;

/// Pins the calling thread to `core`.
///
/// # Errors
///
/// When the kernel refuses (usually: no such core).
pub fn pin_to_core(core: usize) -> Result<(), Error> {
    let mut set = CpuSet::new();
    set.set(core);
    sched_setaffinity(None, &set).map_err(|e| {
        Error::Failed(format!(
            "cannot pin to core {core}: {e} (this machine has {} cores: choose 0..{})",
            available_cores(),
            available_cores().saturating_sub(1)
        ))
    })
}

/// Number of cores this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
