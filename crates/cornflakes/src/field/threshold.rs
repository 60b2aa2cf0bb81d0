//! The machine's zero-copy threshold: the one `cf calibrate` measured here,
//! or the paper's 512 bytes when nothing was measured.
//!
//! The calibration file is a few `key = value` lines (`#` starts a comment):
//!
//! ```text
//! # written by `cf calibrate` on 2026-11-24
//! default = 1024
//! shm = 1024
//! udp = 512
//! ```
//!
//! `default` is what [`Arena::calibrated`](super::Arena::calibrated) uses;
//! the others are per datapath, for servers that know theirs
//! ([`Threshold::for_datapath`]; `cf kv-server` does). [`Arena::new`](super::Arena::new)
//! keeps the paper's 512 bytes, so that a program's tests do not depend on
//! the machine they run on.
//! Where it is looked for, first match wins:
//!
//! 1. `CORNFLAKES_THRESHOLD=<bytes>` in the environment (all datapaths);
//! 2. the file named by `CORNFLAKES_CALIBRATION`;
//! 3. the default place, given by [`calibration_path`]:
//!    `$XDG_CONFIG_HOME/cornflakes/calibration`, else
//!    `$HOME/.config/cornflakes/calibration`.
//!
//! It is read once per process. A file that does not parse is reported on
//! stderr once and ignored (the paper's default is used), never a panic.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::DEFAULT_THRESHOLD;

/// Where the threshold in use came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThresholdSource {
    /// Nothing measured: the paper's 512 bytes.
    PaperDefault,
    /// The `CORNFLAKES_THRESHOLD` environment variable.
    Environment,
    /// A calibration file.
    File(PathBuf),
}

impl std::fmt::Display for ThresholdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThresholdSource::PaperDefault => {
                write!(f, "the paper's default (no calibration found; run `cf calibrate`)")
            }
            ThresholdSource::Environment => write!(f, "CORNFLAKES_THRESHOLD"),
            ThresholdSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The thresholds in use on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Threshold {
    /// Bytes at and above which a pool-resident field goes zero-copy, when
    /// the datapath is not known.
    pub default: usize,
    /// Per datapath (`shm`, `udp`, `tcp`, ...), as calibrated.
    pub per_datapath: Vec<(String, usize)>,
    /// Where these came from.
    pub source: ThresholdSource,
}

impl Threshold {
    /// The paper's threshold for every datapath.
    pub fn paper() -> Self {
        Threshold { default: DEFAULT_THRESHOLD, per_datapath: Vec::new(), source: ThresholdSource::PaperDefault }
    }

    /// The threshold for `datapath`, or the default when it was not
    /// calibrated.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::field::Threshold;
    ///
    /// let t = Threshold::parse("default = 700\nshm = 2048 # measured\n", None).unwrap();
    /// assert_eq!(t.for_datapath("shm"), 2048);
    /// assert_eq!(t.for_datapath("udp"), 700);
    /// ```
    pub fn for_datapath(&self, datapath: &str) -> usize {
        self.per_datapath.iter().find(|(d, _)| d == datapath).map_or(self.default, |&(_, t)| t)
    }

    /// Parses a calibration file's text; `path` is recorded as the source.
    ///
    /// # Errors
    ///
    /// A line that is not `key = bytes` (bytes a decimal number, or `never`
    /// for "copy always"), with its number.
    pub fn parse(text: &str, path: Option<&Path>) -> Result<Self, String> {
        let mut t = Threshold {
            default: DEFAULT_THRESHOLD,
            per_datapath: Vec::new(),
            source: path.map_or(ThresholdSource::PaperDefault, |p| ThresholdSource::File(p.to_owned())),
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (key, value) = line.split_once('=').ok_or_else(|| format!("line {}: expected `key = bytes`", n + 1))?;
            let (key, value) = (key.trim(), value.trim());
            let bytes = parse_bytes(value).ok_or_else(|| format!("line {}: `{value}` is not a byte count", n + 1))?;
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(format!("line {}: `{key}` is not a datapath name", n + 1));
            }
            if key == "default" {
                t.default = bytes;
            } else {
                t.per_datapath.retain(|(d, _)| d != key);
                t.per_datapath.push((key.to_owned(), bytes));
            }
        }
        Ok(t)
    }

    /// The file's text for these thresholds, under a comment line.
    pub fn to_file_text(&self, comment: &str) -> String {
        let mut out = String::new();
        for line in comment.lines() {
            out.push_str("# ");
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&format!("default = {}\n", format_bytes(self.default)));
        for (d, t) in &self.per_datapath {
            out.push_str(&format!("{d} = {}\n", format_bytes(*t)));
        }
        out
    }
}

fn parse_bytes(value: &str) -> Option<usize> {
    if value == "never" {
        return Some(super::ONLY_COPY);
    }
    value.parse().ok()
}

fn format_bytes(t: usize) -> String {
    if t == super::ONLY_COPY {
        "never".to_owned()
    } else {
        t.to_string()
    }
}

/// Where the calibration file is: `$CORNFLAKES_CALIBRATION`, else
/// `$XDG_CONFIG_HOME/cornflakes/calibration`, else
/// `$HOME/.config/cornflakes/calibration`; `None` when none of these
/// variables is set.
pub fn calibration_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CORNFLAKES_CALIBRATION") {
        return Some(PathBuf::from(p));
    }
    let base = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(x) if !x.is_empty() => PathBuf::from(x),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some(base.join("cornflakes").join("calibration"))
}

/// Looks the thresholds up as the module docs say. Reads the environment
/// and the file every time; [`machine_threshold`] does it once.
pub fn load_threshold() -> Threshold {
    if let Some(v) = std::env::var_os("CORNFLAKES_THRESHOLD") {
        match v.to_str().and_then(parse_bytes) {
            Some(bytes) => {
                return Threshold { default: bytes, per_datapath: Vec::new(), source: ThresholdSource::Environment }
            }
            None => eprintln!("cornflakes: ignoring CORNFLAKES_THRESHOLD={v:?}: not a byte count or `never`"),
        }
    }
    let Some(path) = calibration_path() else { return Threshold::paper() };
    match std::fs::read_to_string(&path) {
        Ok(text) => Threshold::parse(&text, Some(&path)).unwrap_or_else(|e| {
            eprintln!("cornflakes: ignoring calibration file {}: {e}", path.display());
            Threshold::paper()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Threshold::paper(),
        Err(e) => {
            eprintln!("cornflakes: cannot read calibration file {}: {e}", path.display());
            Threshold::paper()
        }
    }
}

/// This process's thresholds, looked up once (see the module docs). Under
/// Miri, which isolates the program from the host, the paper's default.
pub fn machine_threshold() -> &'static Threshold {
    static ONCE: OnceLock<Threshold> = OnceLock::new();
    ONCE.get_or_init(|| if cfg!(miri) { Threshold::paper() } else { load_threshold() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comments_never_and_repeats() {
        let t = Threshold::parse("# x\n\ndefault = 64\nshm = never\nudp=1024\nudp = 2048\n", None).unwrap();
        assert_eq!(t.default, 64);
        assert_eq!(t.for_datapath("shm"), usize::MAX);
        assert_eq!(t.for_datapath("udp"), 2048);
        assert_eq!(t.for_datapath("tcp"), 64);
        let again = Threshold::parse(&t.to_file_text("made by a test"), None).unwrap();
        assert_eq!(again, t);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for bad in ["default", "default = -1", "default = 1k", " = 5", "a b = 5", "shm = "] {
            assert!(Threshold::parse(bad, None).is_err(), "{bad:?}");
        }
    }
}
