//! Pinning the current thread to one core, so that benchmark runs do not
//! migrate (and, with two processes, do not share a core).

use rustix::thread::{sched_setaffinity, CpuSet};

/// Pins the calling thread to `core`; returns an explanation on failure.
pub(crate) fn pin_to_core(core: usize) -> Result<(), String> {
    let mut set = CpuSet::new();
    set.set(core);
    sched_setaffinity(None, &set).map_err(|e| format!("cannot pin to core {core}: {e}"))
}

/// Number of cores this process may run on.
pub(crate) fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
