//! Workload descriptions as they travel on command lines between the
//! processes of one run: `name` or `name:param=value,param=value`.

use std::fmt;
use std::str::FromStr;

use cornflakes_kv_protocol::Limits;

use crate::{cdn, echo, google, twitter, ycsb, Workload};

/// A parsed workload description, e.g. `echo`, `echo:fields=2,size=2048`,
/// `ycsb:keys=1000000,fields=4,size=1024`, `google:keys=100000,max=8`,
/// `twitter:keys=1000000`, `cdn:objects=20000`. Parameters left out take
/// the defaults of [`WorkloadSpec::default_for`]; [`fmt::Display`] writes
/// every parameter, and parsing that text gives back the same spec.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSpec {
    /// Echo server (paper Fig. 2): each request carries `fields` values of
    /// `size` bytes, one of `keys` distinct payloads; nothing is preloaded.
    Echo {
        /// Values per message.
        fields: u32,
        /// Bytes per value.
        size: u32,
        /// Distinct payloads (64 by default: they stay in cache).
        keys: u32,
    },
    /// YCSB-C (paper §5): `keys` keys of 30–31 bytes, YCSB's scrambled
    /// Zipfian(0.99), each value a list of `fields` elements of `size` bytes.
    Ycsb {
        /// Number of keys.
        keys: u32,
        /// Elements per value (the paper's "number of buffers").
        fields: u32,
        /// Bytes per element.
        size: u32,
    },
    /// The calibration grid (`cf calibrate`, paper §5): YCSB's keys and
    /// values (`fields` elements of `size` bytes), keys drawn uniformly so
    /// that the working set is all `keys × fields × size` bytes.
    Grid {
        /// Number of keys.
        keys: u32,
        /// Elements per value.
        fields: u32,
        /// Bytes per element.
        size: u32,
    },
    /// YCSB's keys and plain values, each request a get-many ([`Op::GetM`])
    /// of `n` keys drawn by the scrambled Zipfian: the paper's mget-2 of its
    /// Redis experiment (Table 3), in the key-value protocol.
    ///
    /// [`Op::GetM`]: crate::Op::GetM
    Mget {
        /// Number of keys.
        keys: u32,
        /// Bytes per value.
        size: u32,
        /// Keys per request.
        n: u32,
    },
    /// Google protobuf bytes-field sizes (paper §6.1.4): `keys` 64-byte keys,
    /// each value a list of 1..=`max` fields, keys queried uniformly.
    Google {
        /// Number of keys.
        keys: u32,
        /// Largest list length (1, 4, 8 or 16 in the paper).
        max: u32,
    },
    /// Twitter cache cluster 4 (paper §6.1.4), synthesized from its published
    /// statistics: Zipf(1.1) popularity, fitted value sizes, `puts` of the
    /// requests are puts.
    Twitter {
        /// Number of keys.
        keys: u32,
        /// Fraction of requests that are puts.
        puts: f64,
    },
    /// CDN images (paper §6.1.4): `objects` objects with Tragen `tc-1` sizes,
    /// each a list of 8000-byte segments fetched one by one.
    Cdn {
        /// Number of objects (keys).
        objects: u32,
    },
}

/// Why a workload description was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// The name before `:` is not a workload.
    #[error("unknown workload `{0}` (expected one of: echo, ycsb, google, twitter, cdn, grid)")]
    UnknownWorkload(String),
    /// A parameter this workload does not have.
    #[error("{workload}: unknown parameter `{param}` (expected {expected})")]
    UnknownParameter {
        /// The workload.
        workload: &'static str,
        /// The parameter as written.
        param: String,
        /// The parameters the workload has.
        expected: &'static str,
    },
    /// A parameter given twice.
    #[error("{workload}: parameter `{param}` is given twice")]
    DuplicateParameter {
        /// The workload.
        workload: &'static str,
        /// The parameter.
        param: String,
    },
    /// An item that is not `param=value`.
    #[error("{workload}: `{item}` is not of the form param=value")]
    Malformed {
        /// The workload.
        workload: &'static str,
        /// The item as written.
        item: String,
    },
    /// A value that does not parse or is out of range.
    #[error("{workload}: bad value `{value}` for `{param}`: {reason}")]
    BadValue {
        /// The workload.
        workload: &'static str,
        /// The parameter.
        param: &'static str,
        /// The value as written (or as set).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

const NAMES: [&str; 5] = ["echo", "ycsb", "google", "twitter", "cdn"];

impl WorkloadSpec {
    /// Every workload name, in the paper's order of presentation.
    pub fn names() -> &'static [&'static str] {
        &NAMES
    }

    /// The default spec of workload `name` (a name from [`Self::names`]),
    /// sized for runs of a minute or two on a 2-core machine: every
    /// preloaded working set is 400–600 MB, several times a 105 MiB L3.
    pub fn default_for(name: &str) -> Option<WorkloadSpec> {
        Some(match name {
            "echo" => {
                WorkloadSpec::Echo { fields: echo::DEFAULT_FIELDS, size: echo::DEFAULT_SIZE, keys: echo::DEFAULT_KEYS }
            }
            "ycsb" => {
                WorkloadSpec::Ycsb { keys: ycsb::DEFAULT_KEYS, fields: ycsb::DEFAULT_FIELDS, size: ycsb::DEFAULT_SIZE }
            }
            "google" => WorkloadSpec::Google { keys: google::DEFAULT_KEYS, max: google::DEFAULT_MAX },
            "twitter" => WorkloadSpec::Twitter { keys: twitter::DEFAULT_KEYS, puts: twitter::DEFAULT_PUTS },
            "cdn" => WorkloadSpec::Cdn { objects: cdn::DEFAULT_OBJECTS },
            "grid" => WorkloadSpec::Grid { keys: 64, fields: 1, size: 512 },
            "mget" => WorkloadSpec::Mget { keys: ycsb::DEFAULT_KEYS, size: 2048, n: 2 },
            _ => return None,
        })
    }

    /// The workload's name (the part before `:`).
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadSpec::Echo { .. } => "echo",
            WorkloadSpec::Ycsb { .. } => "ycsb",
            WorkloadSpec::Grid { .. } => "grid",
            WorkloadSpec::Mget { .. } => "mget",
            WorkloadSpec::Google { .. } => "google",
            WorkloadSpec::Twitter { .. } => "twitter",
            WorkloadSpec::Cdn { .. } => "cdn",
        }
    }

    /// The workload itself, after checking the parameters (a spec built in
    /// code rather than parsed is checked here).
    pub fn build(&self) -> Result<Box<dyn Workload>, WorkloadError> {
        self.validate()?;
        Ok(match *self {
            WorkloadSpec::Echo { fields, size, keys } => Box::new(echo::Echo::new(fields, size, keys)),
            WorkloadSpec::Ycsb { keys, fields, size } => Box::new(ycsb::Ycsb::new(keys, fields, size)),
            WorkloadSpec::Grid { keys, fields, size } => Box::new(ycsb::Ycsb::uniform(keys, fields, size)),
            WorkloadSpec::Mget { keys, size, n } => Box::new(ycsb::Ycsb::get_many(keys, size, n)),
            WorkloadSpec::Google { keys, max } => Box::new(google::Google::new(keys, max)),
            WorkloadSpec::Twitter { keys, puts } => Box::new(twitter::Twitter::new(keys, puts)),
            WorkloadSpec::Cdn { objects } => Box::new(cdn::Cdn::new(objects)),
        })
    }

    /// The parameters this workload has, for error messages.
    fn expected(&self) -> &'static str {
        match self {
            WorkloadSpec::Echo { .. } => {
                "fields (values per message), size (bytes per value), keys (distinct payloads)"
            }
            WorkloadSpec::Ycsb { .. } | WorkloadSpec::Grid { .. } => {
                "keys, fields (elements per value), size (bytes per element)"
            }
            WorkloadSpec::Mget { .. } => "keys, size (bytes per value), n (keys per request)",
            WorkloadSpec::Google { .. } => "keys, max (largest list length)",
            WorkloadSpec::Twitter { .. } => "keys, puts (fraction of requests)",
            WorkloadSpec::Cdn { .. } => "objects",
        }
    }

    /// Sets one parameter from its text.
    fn set(&mut self, param: &str, value: &str) -> Result<(), WorkloadError> {
        let workload = self.kind();
        let expected = self.expected();
        let unknown = || WorkloadError::UnknownParameter { workload, param: param.to_owned(), expected };
        let count = |name: &'static str| parse_count(workload, name, value);
        match self {
            WorkloadSpec::Echo { fields, size, .. }
            | WorkloadSpec::Ycsb { fields, size, .. }
            | WorkloadSpec::Grid { fields, size, .. }
                if matches!(param, "fields" | "size") =>
            {
                if param == "fields" {
                    *fields = count("fields")?;
                } else {
                    *size = count("size")?;
                }
            }
            WorkloadSpec::Echo { keys, .. }
            | WorkloadSpec::Ycsb { keys, .. }
            | WorkloadSpec::Grid { keys, .. }
            | WorkloadSpec::Mget { keys, .. }
            | WorkloadSpec::Google { keys, .. }
            | WorkloadSpec::Twitter { keys, .. }
                if param == "keys" =>
            {
                *keys = count("keys")?
            }
            WorkloadSpec::Google { max, .. } if param == "max" => *max = count("max")?,
            WorkloadSpec::Mget { size, .. } if param == "size" => *size = count("size")?,
            WorkloadSpec::Mget { n, .. } if param == "n" => *n = count("n")?,
            WorkloadSpec::Twitter { puts, .. } if param == "puts" => {
                *puts = value.parse::<f64>().map_err(|_| WorkloadError::BadValue {
                    workload,
                    param: "puts",
                    value: value.to_owned(),
                    reason: "expected a fraction such as 0.08".into(),
                })?
            }
            WorkloadSpec::Cdn { objects } if param == "objects" => *objects = count("objects")?,
            _ => return Err(unknown()),
        }
        Ok(())
    }

    /// Checks every parameter against what the workload and the store's
    /// [`Limits`] allow, so that a run never trips a server limit.
    fn validate(&self) -> Result<(), WorkloadError> {
        let workload = self.kind();
        let limits = Limits::default();
        let bad = |param: &'static str, value: String, reason: String| {
            Err(WorkloadError::BadValue { workload, param, value, reason })
        };
        let range = |param: &'static str, v: u32, lo: u32, hi: u64| {
            if v < lo || u64::from(v) > hi {
                bad(param, v.to_string(), format!("must be in {lo}..={hi}"))
            } else {
                Ok(())
            }
        };
        let list = |fields: u32, size: u32| {
            range("fields", fields, 1, limits.max_list as u64)?;
            range("size", size, 1, limits.max_value as u64)?;
            let total = u64::from(fields) * u64::from(size);
            if total > limits.max_response as u64 {
                return bad(
                    "size",
                    size.to_string(),
                    format!("fields × size = {total} exceeds the store's largest response, {}", limits.max_response),
                );
            }
            Ok(())
        };
        match *self {
            WorkloadSpec::Echo { fields, size, keys } => {
                range("keys", keys, 1, echo::MAX_KEYS.into())?;
                list(fields, size)?;
                // The load generator holds every payload in its pool.
                let held = u64::from(keys) * u64::from(fields) * u64::from(size);
                if held > echo::MAX_HELD_BYTES {
                    return bad(
                        "keys",
                        keys.to_string(),
                        format!("keys × fields × size = {held} B exceeds {} B of payloads", echo::MAX_HELD_BYTES),
                    );
                }
                Ok(())
            }
            WorkloadSpec::Ycsb { keys, fields, size } | WorkloadSpec::Grid { keys, fields, size } => {
                range("keys", keys, 1, ycsb::MAX_KEYS.into())?;
                list(fields, size)
            }
            WorkloadSpec::Mget { keys, size, n } => {
                range("keys", keys, 1, ycsb::MAX_KEYS.into())?;
                range("n", n, 1, limits.max_keys as u64)?;
                list(n, size)
            }
            WorkloadSpec::Google { keys, max } => {
                range("keys", keys, 1, google::MAX_KEYS.into())?;
                range("max", max, 1, google::MAX_LIST.into())
            }
            WorkloadSpec::Twitter { keys, puts } => {
                range("keys", keys, 1, twitter::MAX_KEYS.into())?;
                if !(0.0..=1.0).contains(&puts) {
                    return bad("puts", puts.to_string(), "must be a fraction in 0..=1".into());
                }
                Ok(())
            }
            WorkloadSpec::Cdn { objects } => range("objects", objects, 1, cdn::MAX_OBJECTS.into()),
        }
    }
}

/// A positive count; `_` separators are allowed (`keys=1_000_000`).
fn parse_count(workload: &'static str, param: &'static str, value: &str) -> Result<u32, WorkloadError> {
    let digits: String = value.chars().filter(|&c| c != '_').collect();
    digits.parse::<u32>().map_err(|e| WorkloadError::BadValue {
        workload,
        param,
        value: value.to_owned(),
        reason: format!("expected a whole number ({e})"),
    })
}

impl FromStr for WorkloadSpec {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, params) = match s.split_once(':') {
            Some((name, params)) => (name.trim(), Some(params)),
            None => (s, None),
        };
        let mut spec =
            WorkloadSpec::default_for(name).ok_or_else(|| WorkloadError::UnknownWorkload(name.to_owned()))?;
        let workload = spec.kind();
        let mut seen: Vec<&str> = Vec::new();
        for item in params.into_iter().flat_map(|p| p.split(',')) {
            let Some((param, value)) = item.split_once('=') else {
                return Err(WorkloadError::Malformed { workload, item: item.to_owned() });
            };
            let (param, value) = (param.trim(), value.trim());
            if seen.contains(&param) {
                return Err(WorkloadError::DuplicateParameter { workload, param: param.to_owned() });
            }
            seen.push(param);
            spec.set(param, value)?;
        }
        spec.validate()?;
        Ok(spec)
    }
}

impl fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadSpec::Echo { fields, size, keys } => write!(f, "echo:fields={fields},size={size},keys={keys}"),
            WorkloadSpec::Ycsb { keys, fields, size } => write!(f, "ycsb:keys={keys},fields={fields},size={size}"),
            WorkloadSpec::Grid { keys, fields, size } => write!(f, "grid:keys={keys},fields={fields},size={size}"),
            WorkloadSpec::Mget { keys, size, n } => write!(f, "mget:keys={keys},size={size},n={n}"),
            WorkloadSpec::Google { keys, max } => write!(f, "google:keys={keys},max={max}"),
            WorkloadSpec::Twitter { keys, puts } => write!(f, "twitter:keys={keys},puts={puts}"),
            WorkloadSpec::Cdn { objects } => write!(f, "cdn:objects={objects}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<WorkloadSpec, WorkloadError> {
        s.parse()
    }

    #[test]
    fn defaults_parse_and_round_trip() {
        for name in WorkloadSpec::names() {
            let spec = parse(name).unwrap();
            assert_eq!(Some(spec.clone()), WorkloadSpec::default_for(name));
            assert_eq!(spec.kind(), *name);
            let text = spec.to_string();
            assert!(text.starts_with(&format!("{name}:")), "{text}");
            assert_eq!(parse(&text).unwrap(), spec, "{text}");
        }
        assert_eq!(WorkloadSpec::default_for("nope"), None);
    }

    #[test]
    fn parameters_parse_and_round_trip() {
        let cases = [
            ("echo:fields=2,size=2048", WorkloadSpec::Echo { fields: 2, size: 2048, keys: 64 }),
            ("echo:size=64,keys=4096", WorkloadSpec::Echo { fields: 2, size: 64, keys: 4096 }),
            ("ycsb:keys=1_000_000,fields=2,size=2048", WorkloadSpec::Ycsb { keys: 1_000_000, fields: 2, size: 2048 }),
            ("google:keys=100000,max=16", WorkloadSpec::Google { keys: 100_000, max: 16 }),
            (" twitter : keys = 4000000 , puts = 0.07 ", WorkloadSpec::Twitter { keys: 4_000_000, puts: 0.07 }),
            ("cdn:objects=20000", WorkloadSpec::Cdn { objects: 20_000 }),
        ];
        for (text, want) in cases {
            let got = parse(text).unwrap();
            assert_eq!(got, want, "{text}");
            assert_eq!(parse(&got.to_string()).unwrap(), got);
        }
        assert_eq!(WorkloadSpec::Ycsb { keys: 7, fields: 4, size: 1024 }.to_string(), "ycsb:keys=7,fields=4,size=1024");
    }

    #[test]
    fn errors_name_the_problem() {
        let msg = |s: &str| parse(s).unwrap_err().to_string();
        assert!(msg("memcached").contains("unknown workload `memcached`"));
        let m = msg("ycsb:values=4x1024");
        assert!(m.contains("unknown parameter `values`") && m.contains("fields (elements per value)"), "{m}");
        assert!(msg("ycsb:keys=ten").contains("bad value `ten` for `keys`"));
        assert!(msg("ycsb:keys=0").contains("`keys`"));
        assert!(msg("google:max=0").contains("bad value `0` for `max`"));
        assert!(msg("google:max=100").contains("`max`"));
        assert!(msg("cdn:objects").contains("not of the form param=value"));
        assert!(msg("cdn:objects=5,objects=6").contains("`objects` is given twice"));
        assert!(msg("twitter:puts=1.5").contains("bad value `1.5` for `puts`"));
        assert!(msg("twitter:puts=lots").contains("`puts`"));
        assert!(msg("echo:fields=2,size=1048576").contains("largest response"));
        assert!(msg("echo:objects=3").contains("unknown parameter `objects`"));
        assert!(msg("echo:keys=0").contains("bad value `0` for `keys`"));
        assert!(msg("echo:keys=1000000").contains("payloads"), "{}", msg("echo:keys=1000000"));
        assert!(matches!(parse("cdn:max=3"), Err(WorkloadError::UnknownParameter { workload: "cdn", .. })));
    }

    #[test]
    fn build_checks_specs_made_in_code() {
        assert!(WorkloadSpec::Ycsb { keys: 0, fields: 1, size: 1 }.build().is_err());
        assert!(WorkloadSpec::Twitter { keys: 10, puts: f64::NAN }.build().is_err());
        for name in WorkloadSpec::names() {
            let spec = WorkloadSpec::default_for(name).unwrap();
            let w = spec.build().unwrap();
            assert!(!w.name().is_empty());
            assert!(w.num_keys() > 0);
        }
    }
}
