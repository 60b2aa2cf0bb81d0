//! glibc's `memcpy` on AMD CPUs: `cf` runs with `rep movsb` switched off.
//!
//! glibc 2.36 (Debian 12's) copies runs of 2112 B or more with `rep movsb`
//! on CPUs that have fast `rep movsb` (FSRM), AMD Zen 3 and 4 among them.
//! There it is about 3x slower whenever the destination is 1 to 31 bytes
//! ahead of the source modulo a page (reported as glibc bug 30994). Serializers hit that all the time: a value
//! at the start of a page is copied after a tag, a length or a header. On
//! this project's AMD guest, 8000 B copies took 3.8-4.5 µs at those
//! distances and 1.2-1.6 µs at others (`docs/results/2026-11-29-rep-movsb/`),
//! and protobuf's CDN server ran at a third of its speed with it.
//!
//! The threshold can only be set before a process starts (it is read at
//! start-up from `GLIBC_TUNABLES`), so `cf` re-runs itself with it set
//! ([`tunables_for_this_cpu`]); every process it starts (servers, load
//! generators) inherits it, so every system compared copies alike. Setting
//! `GLIBC_TUNABLES` yourself, even to the empty string, keeps your choice.

/// The tunable `cf` sets on AMD CPUs: `rep movsb` only for copies of 2 MB
/// or more (no message here is that long); shorter ones take glibc's
/// vector loop.
pub const REP_MOVSB_OFF: &str = "glibc.cpu.x86_rep_movsb_threshold=2000000";

/// The environment variable glibc reads its tunables from.
pub const TUNABLES_VAR: &str = "GLIBC_TUNABLES";

/// `GLIBC_TUNABLES` for `cf` to re-run itself with, or `None` to run as it
/// is: `Some` on an x86-64 glibc system with an AMD CPU when
/// `GLIBC_TUNABLES` is not set at all, unless the process runs under
/// valgrind (whose tools would not follow the re-run: `valgrind cf ...`
/// would count nothing).
pub fn tunables_for_this_cpu() -> Option<&'static str> {
    if !cfg!(all(target_arch = "x86_64", target_env = "gnu")) {
        return None;
    }
    let preload = std::env::var_os("LD_PRELOAD");
    let preload = preload.as_deref().map(|p| p.to_string_lossy());
    let rerun = std::env::var_os(TUNABLES_VAR).is_none()
        && !under_valgrind(preload.as_deref())
        && cornflakes_datapath::shm::is_amd();
    rerun.then_some(REP_MOVSB_OFF)
}

/// Whether `LD_PRELOAD` is valgrind's: it preloads its `vgpreload_*.so`
/// into the programs it runs.
fn under_valgrind(ld_preload: Option<&str>) -> bool {
    ld_preload.is_some_and(|p| p.contains("vgpreload"))
}

/// What this process's copies run with, for reports: `GLIBC_TUNABLES` as
/// set, or `None`.
pub fn tunables_in_effect() -> Option<String> {
    std::env::var(TUNABLES_VAR).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valgrind_is_recognised_by_its_preload() {
        assert!(under_valgrind(Some("/usr/libexec/valgrind/vgpreload_core-amd64-linux.so")));
        assert!(!under_valgrind(Some("/usr/lib/libcornflakes_preload.so")));
        assert!(!under_valgrind(None));
    }
}
