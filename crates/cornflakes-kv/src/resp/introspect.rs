//! OBJECT (ENCODING FREQ IDLETIME REFCOUNT) and MEMORY USAGE: what
//! `redis-cli --memkeys` and `--hotkeys` ask of each key. Encodings are
//! the ones Redis 7.0 would use for the value (by its size rules); memory
//! is this server's own estimate, not Redis's allocator's.

use std::borrow::Cow;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;

use super::evict::EvictionPolicy;
use super::{arity_error, integer_arg, unknown_subcommand, Kind, RespDb, NOT_INTEGER};
use crate::store::Collection;

/// Bytes this server spends on a key besides its bytes (map entry, value
/// header), and on each element besides its bytes (pool buffer handle).
const KEY_OVERHEAD: usize = 48;
const ELEMENT_OVERHEAD: usize = 16;

impl RespDb {
    /// `OBJECT <subcommand> key`.
    pub(super) fn object(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let sub = args[0].to_ascii_lowercase();
        let known = ["encoding", "freq", "idletime", "refcount"];
        if sub == b"help" {
            let lines = [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key>.",
                "FREQ <key>",
                "    Return the access frequency index of the <key>. The returned integer is",
                "    proportional to the logarithm of the recent access frequency of the key.",
                "IDLETIME <key>",
                "    Return the idle time of the <key>, that is the approximated number of",
                "    seconds elapsed since the last access to the key.",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with the specified",
                "    <key>.",
                "HELP",
                "    Print this help.",
            ];
            return super::help_reply(reply, &lines);
        }
        let Some(&name) = known.iter().find(|k| k.as_bytes() == sub) else {
            return reply.error(&unknown_subcommand("object", &args[0]));
        };
        let [_, key] = args else { return reply.error(&arity_error(&format!("object|{name}"))) };
        let Some(kind) = self.kind(key) else { return reply.null() };
        match name {
            "encoding" => reply.bulk(self.encoding(key, kind).as_bytes()),
            "refcount" => reply.integer(1),
            "freq" => {
                if !matches!(self.policy, EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu) {
                    return reply.error("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
                }
                match self.store.key_index().and_then(|i| i.get(key)) {
                    Some(a) => reply.integer(i64::from(a.frequency)),
                    None => reply.integer(0),
                }
            }
            _ => {
                if matches!(self.policy, EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu) {
                    return reply.error("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
                }
                match self.store.key_index().and_then(|i| Some((i.get(key)?, i.second()))) {
                    Some((a, now)) => reply.integer(i64::from(now.saturating_sub(a.at_second))),
                    // Accesses are kept only while a policy reads them.
                    None => reply.error("ERR this server tracks idle time only under an LRU maxmemory policy (CONFIG SET maxmemory-policy allkeys-lru)"),
                }
            }
        }
    }

    /// The encoding Redis 7.0 would give `key`'s value.
    fn encoding(&self, key: &[u8], kind: Kind) -> &'static str {
        let short = |b: &[u8]| b.len() <= 64;
        match kind {
            Kind::String => match self.store.get(key).and_then(|v| v.first()) {
                Some(v) if v.len() <= 20 && integer_arg(v).is_some() => "int",
                Some(v) if v.len() <= 44 => "embstr",
                _ => "raw",
            },
            Kind::List => "quicklist",
            Kind::Hash => match self.store.hash(key) {
                Some(h) if h.len() <= 128 && h.iter().all(|(f, v)| short(f) && short(v)) => "listpack",
                _ => "hashtable",
            },
            Kind::Set => match self.store.set(key) {
                Some(s) if s.len() <= 512 && s.iter().all(|m| integer_arg(m).is_some()) => "intset",
                _ => "hashtable",
            },
            Kind::ZSet => match self.store.zset(key) {
                Some(z) if z.len() <= 128 && z.iter().all(|(m, _)| short(m)) => "listpack",
                _ => "skiplist",
            },
        }
    }

    /// `MEMORY USAGE key [SAMPLES n]`: this server's estimate of the bytes
    /// `key` takes (every element counted; SAMPLES is accepted and not
    /// needed).
    pub(super) fn memory(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        if !args[0].eq_ignore_ascii_case(b"usage") {
            return reply.error(&unknown_subcommand("memory", &args[0]));
        }
        let key = match &args[1..] {
            [key] => key,
            [key, opt, n] if opt.eq_ignore_ascii_case(b"samples") => {
                if integer_arg(n).is_none() {
                    return reply.error(NOT_INTEGER);
                }
                key
            }
            [] => return reply.error(&arity_error("memory|usage")),
            _ => return reply.error(super::SYNTAX),
        };
        if self.kind(key).is_none() {
            return reply.null();
        }
        let per = |n: usize, bytes: usize| n * ELEMENT_OVERHEAD + bytes;
        let value = match (self.store.get(key), self.store.collection(key)) {
            (Some(elems), _) => per(elems.len(), elems.iter().map(|b| b.len()).sum()),
            (None, Some(Collection::Hash(h))) => per(2 * h.len(), h.iter().map(|(f, v)| f.len() + v.len()).sum()),
            (None, Some(Collection::Set(s))) => per(s.len(), s.iter().map(<[u8]>::len).sum()),
            (None, Some(Collection::ZSet(z))) => per(2 * z.len(), z.iter().map(|(m, _)| 2 * m.len() + 8).sum()),
            (None, None) => 0,
        };
        reply.integer((KEY_OVERHEAD + key.len() + value) as i64);
    }
}
