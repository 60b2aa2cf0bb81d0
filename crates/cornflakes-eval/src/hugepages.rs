//! Hugepages for the servers of a run: reserved at the start (root only),
//! given back at the end.
//!
//! Why: on the Intel test VM, how fast a process's memory is depends on
//! which of the guest's free pages it gets. A random pointer chase over
//! 400 MB of freshly allocated small pages took 230-400 ns a step, lower
//! after more memory had been touched just before
//! (`docs/results/2026-11-28-first-server-chase/`), and a `cf compare`
//! server keeps the memory it started with for its whole sweep: the same
//! build on Google 1-8 measured 0.44-1.24x of itself in two default runs.
//! With every server's pool in reserved 2 MiB pages (kept by the kernel
//! between servers, never handed back to the host) every system ran
//! faster, and the first-started one steadily: Google 1-8, the hybrid
//! 731-746 k requests/s in four runs (the others still moved, less:
//! `docs/results/2026-11-28-batch-prefetch/`). Not a cure: on Google 1-4
//! with every system, the first two started ran 1.07-1.35x their
//! small-page maxima and the 5th-7th 0.80-0.98x
//! (`docs/results/2026-11-28-footprint/`).
//!
//! The servers use hugepages only when enough are free for their whole
//! store ([`crate::kv`]), so a reservation too small for every server of a
//! workload would favour the first ones started: the default asks for
//! half the available memory, at most [`AUTO_MAX`].
//!
//! A run that is interrupted (Ctrl-C, `SIGTERM`, `SIGHUP`) gives them back
//! too, then exits with status 130: otherwise half the machine's memory
//! stayed reserved (and its servers' next runs then behaved differently).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The kernel's count of reserved hugepages of the default size.
const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

/// Most bytes [`HugepagePolicy::Auto`] asks for.
pub const AUTO_MAX: u64 = 12 << 30;

/// How much hugepage memory a run wants free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugepagePolicy {
    /// Half of `MemAvailable`, at most [`AUTO_MAX`]; without the rights to
    /// reserve them, a warning and small pages.
    Auto,
    /// Leave the machine as it is.
    Off,
    /// At least this many bytes free; failing to reserve them is an error.
    Bytes(u64),
}

impl std::str::FromStr for HugepagePolicy {
    type Err = String;

    /// `auto`, `off`, or a size in MiB.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_eval::hugepages::HugepagePolicy;
    /// assert_eq!("auto".parse(), Ok(HugepagePolicy::Auto));
    /// assert_eq!("4096".parse(), Ok(HugepagePolicy::Bytes(4 << 30)));
    /// assert!("lots".parse::<HugepagePolicy>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(HugepagePolicy::Auto),
            "off" => Ok(HugepagePolicy::Off),
            mib => mib
                .parse::<u64>()
                .ok()
                .and_then(|m| m.checked_mul(1 << 20))
                .map(HugepagePolicy::Bytes)
                .ok_or_else(|| format!("--hugepages takes auto, off or a size in MiB, not {mib:?}")),
        }
    }
}

/// Hugepages this run added; dropping it gives them back.
#[derive(Debug)]
pub struct Reservation {
    restore_to: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        RESTORE_ON_INTERRUPT.store(NOTHING_TO_RESTORE, Ordering::SeqCst);
        if let Err(e) = std::fs::write(NR_HUGEPAGES, self.restore_to.to_string()) {
            eprintln!("warning: cannot give the hugepages back: {e}; run `echo {} > {NR_HUGEPAGES}`", self.restore_to);
        }
    }
}

/// The count an interrupted run restores, or [`NOTHING_TO_RESTORE`].
static RESTORE_ON_INTERRUPT: AtomicU64 = AtomicU64::new(NOTHING_TO_RESTORE);
const NOTHING_TO_RESTORE: u64 = u64::MAX;

/// Makes Ctrl-C, `SIGTERM` and `SIGHUP` restore the count to `restore_to`
/// and exit (the handler is installed once per process; a program that
/// installed its own keeps it, and is warned).
fn restore_on_interrupt(restore_to: u64) {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    RESTORE_ON_INTERRUPT.store(restore_to, Ordering::SeqCst);
    INSTALL.call_once(|| {
        let installed = ctrlc::set_handler(|| {
            let restore_to = RESTORE_ON_INTERRUPT.swap(NOTHING_TO_RESTORE, Ordering::SeqCst);
            if restore_to != NOTHING_TO_RESTORE {
                match std::fs::write(NR_HUGEPAGES, restore_to.to_string()) {
                    Ok(()) => eprintln!("\ninterrupted: gave the hugepages back ({NR_HUGEPAGES} = {restore_to})"),
                    Err(e) => eprintln!(
                        "\ninterrupted: cannot give the hugepages back: {e}; run `echo {restore_to} > {NR_HUGEPAGES}`"
                    ),
                }
            }
            std::process::exit(130);
        });
        if let Err(e) = installed {
            eprintln!("warning: cannot catch Ctrl-C ({e}): if interrupted, run `echo {restore_to} > {NR_HUGEPAGES}`");
        }
    });
}

/// The hugepages to add so that `want` bytes are free, with `free` pages
/// of `page` bytes free now.
fn pages_to_add(want: u64, free: u64, page: u64) -> u64 {
    want.div_ceil(page.max(1)).saturating_sub(free)
}

/// Makes the hugepage memory `policy` asks for free, reporting what it
/// did; `Ok(None)` when nothing was changed.
///
/// # Errors
///
/// With [`HugepagePolicy::Bytes`], when they cannot be reserved (not
/// root, or the memory is too fragmented). `Auto` warns instead.
pub fn reserve(policy: HugepagePolicy) -> Result<Option<Reservation>, String> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name| crate::kv::meminfo_field(&meminfo, name);
    let page = field("Hugepagesize:") * 1024;
    let (total, free) = (field("HugePages_Total:"), field("HugePages_Free:"));
    let want = match policy {
        HugepagePolicy::Off => return Ok(None),
        HugepagePolicy::Auto => (field("MemAvailable:") * 1024 / 2).min(AUTO_MAX),
        HugepagePolicy::Bytes(b) => b,
    };
    let add = pages_to_add(want, free, page);
    if add == 0 || page == 0 {
        return Ok(None);
    }
    let target = total + add;
    let failed = |why: String| -> Result<Option<Reservation>, String> {
        let what = format!(
            "cannot reserve {} MiB of hugepages ({why}): servers use small pages, and on a VM their speed then depends on their start order; run as root, or give --hugepages off",
            want >> 20
        );
        match policy {
            HugepagePolicy::Bytes(_) => Err(what),
            _ => {
                eprintln!("warning: {what}");
                Ok(None)
            }
        }
    };
    // Armed before the write: an interrupt in between restores a count
    // that is already right.
    restore_on_interrupt(total);
    if let Err(e) = std::fs::write(NR_HUGEPAGES, target.to_string()) {
        RESTORE_ON_INTERRUPT.store(NOTHING_TO_RESTORE, Ordering::SeqCst);
        return failed(format!("{NR_HUGEPAGES}: {e}"));
    }
    let reservation = Reservation { restore_to: total };
    let got = read_count(Path::new(NR_HUGEPAGES)).unwrap_or(total);
    if got < target {
        // Dropping `reservation` gives back the part that was reserved.
        return failed(format!("the kernel found {} of {add} pages", got.saturating_sub(total)));
    }
    eprintln!(
        "hugepages: reserved {add} x {} KiB for the servers ({NR_HUGEPAGES} {total} -> {target}; given back at the end, or on Ctrl-C)",
        page >> 10
    );
    Ok(Some(reservation))
}

fn read_count(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_missing_pages_are_added() {
        const PAGE: u64 = 2 << 20;
        assert_eq!(pages_to_add(10 * PAGE, 0, PAGE), 10);
        assert_eq!(pages_to_add(10 * PAGE, 4, PAGE), 6);
        assert_eq!(pages_to_add(10 * PAGE, 12, PAGE), 0);
        assert_eq!(pages_to_add(10 * PAGE + 1, 0, PAGE), 11, "a part page counts whole");
        assert_eq!(pages_to_add(PAGE, 0, 0), PAGE, "no division by a zero page size");
    }

    #[test]
    fn policies_parse_and_bad_sizes_say_what_is_expected() {
        assert_eq!("off".parse(), Ok(HugepagePolicy::Off));
        assert_eq!("0".parse(), Ok(HugepagePolicy::Bytes(0)));
        let e = "18446744073709551615".parse::<HugepagePolicy>().unwrap_err();
        assert!(e.contains("auto, off or a size in MiB"), "{e}");
    }
}
