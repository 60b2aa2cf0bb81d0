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

/// Number of cores this machine has online.
///
/// Not the calling thread's affinity (what `available_parallelism` counts):
/// a run that pinned its own thread earlier (an in-process load generator)
/// would then see one core and warn that pinning will fail.
pub fn available_cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| online_count(&s))
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// Counts the CPUs of a kernel CPU list such as `0-3,6,8-9`.
fn online_count(list: &str) -> Option<usize> {
    list.trim().split(',').try_fold(0usize, |n, part| {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.parse::<usize>().ok()?, hi.parse::<usize>().ok()?),
            None => {
                let c = part.parse::<usize>().ok()?;
                (c, c)
            }
        };
        Some(n + hi.checked_sub(lo)? + 1)
    })
}

#[cfg(test)]
mod tests {
    use super::online_count;

    #[test]
    fn counts_a_kernel_cpu_list() {
        assert_eq!(online_count("0-1\n"), Some(2));
        assert_eq!(online_count("0"), Some(1));
        assert_eq!(online_count("0-3,6,8-9"), Some(7));
        assert_eq!(online_count(""), None);
        assert_eq!(online_count("3-1"), None);
    }

    #[test]
    fn pinning_this_thread_does_not_change_the_count() {
        let before = super::available_cores();
        std::thread::spawn(move || {
            super::pin_to_core(0).expect("core 0 exists");
            assert_eq!(super::available_cores(), before);
        })
        .join()
        .expect("thread");
    }
}
