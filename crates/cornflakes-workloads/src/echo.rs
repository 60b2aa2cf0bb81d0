//! The echo workload (paper §2.2, Fig. 2; §6.2.3): each request carries a
//! list of `fields` values of `size` bytes, which the server deserializes,
//! reserializes and sends back. The server has no working set.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::push_decimal;
use crate::{Generator, Op, Request, Transaction, Workload};

/// Fig. 2: "a list with two 2048 byte elements".
pub(crate) const DEFAULT_FIELDS: u32 = 2;
/// Fig. 2: 2048-byte elements.
pub(crate) const DEFAULT_SIZE: u32 = 2048;
/// Distinct payloads by default: enough that responses can be told apart,
/// few enough that the client's values stay in cache like the paper's.
/// (Sent by reference, as the Cornflakes client sends them, they then stay
/// in the server's cache too; `keys=` makes the set larger than a cache.)
pub(crate) const DEFAULT_KEYS: u32 = 64;
/// The most distinct payloads.
pub(crate) const MAX_KEYS: u32 = 1 << 20;
/// The most payload bytes over all keys (the load generator keeps every
/// payload in its pool once sent): 256 MiB.
pub(crate) const MAX_HELD_BYTES: u64 = 256 << 20;

pub(crate) struct Echo {
    fields: u32,
    size: u32,
    keys: u32,
    name: String,
}

impl Echo {
    pub(crate) fn new(fields: u32, size: u32, keys: u32) -> Self {
        let name = if keys == DEFAULT_KEYS {
            format!("echo-{fields}x{size}B")
        } else {
            format!("echo-{fields}x{size}B-{keys}keys")
        };
        Echo { fields, size, keys, name }
    }
}

impl Workload for Echo {
    fn name(&self) -> &str {
        &self.name
    }

    fn num_keys(&self) -> u32 {
        self.keys
    }

    fn preload(&self) -> bool {
        false
    }

    fn key(&self, i: u32, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(b"echo:");
        push_decimal(out, i.into(), 2);
    }

    fn value_sizes(&self, _i: u32, out: &mut Vec<u32>) {
        out.clear();
        out.resize(self.fields as usize, self.size);
    }

    fn generator(&self, seed: u64) -> Box<dyn Generator> {
        Box::new(EchoGen { rng: SmallRng::seed_from_u64(seed), keys: self.keys })
    }
}

struct EchoGen {
    rng: SmallRng,
    keys: u32,
}

impl Generator for EchoGen {
    fn next(&mut self, out: &mut Transaction) {
        out.requests.clear();
        out.requests.push(Request::one(Op::Echo, self.rng.random_range(0..self.keys)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadSpec;

    #[test]
    fn echo_shape() {
        let w = WorkloadSpec::default_for("echo").unwrap().build().unwrap();
        assert_eq!(w.name(), "echo-2x2048B");
        assert!(!w.preload());
        assert_eq!(crate::total_value_bytes(w.as_ref()), 0);
        let mut sizes = Vec::new();
        w.value_sizes(5, &mut sizes);
        assert_eq!(sizes, [2048, 2048]);
        let mut key = Vec::new();
        w.key(7, &mut key);
        assert_eq!(key, b"echo:07");
        let mut g = w.generator(1);
        let mut t = Transaction::default();
        let mut seen = [false; DEFAULT_KEYS as usize];
        for _ in 0..2000 {
            g.next(&mut t);
            let [r] = t.requests.as_slice() else { panic!("one request per transaction") };
            assert_eq!((r.op, r.keys.len(), r.index), (Op::Echo, 1, 0));
            seen[r.keys[0] as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn more_keys_are_drawn_and_named() {
        let w = "echo:keys=4096".parse::<WorkloadSpec>().unwrap().build().unwrap();
        assert_eq!((w.name(), w.num_keys()), ("echo-2x2048B-4096keys", 4096));
        let mut g = w.generator(1);
        let mut t = Transaction::default();
        let mut highest = 0;
        for _ in 0..2000 {
            g.next(&mut t);
            highest = highest.max(t.requests[0].keys[0]);
        }
        assert!((DEFAULT_KEYS..4096).contains(&highest), "{highest}");
    }
}
