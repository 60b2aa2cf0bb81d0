//! Redis's snapshot format, RDB version 10 (Redis 7.0's): [`Writer`]
//! writes what SAVE and BGSAVE save, in encodings every Redis since 2.6
//! reads (plain strings, lists, sets, hashes, and sorted sets with binary
//! scores); [`read`] reads files this server or redis-server 7.0 wrote,
//! with Redis's compact encodings (integers and LZF-compressed strings,
//! listpacks, quicklists, intsets). Reading checks every length against
//! the bytes there are, so a truncated or corrupt file is an error, never
//! a panic or an allocation of what a length claims; the CRC-64 at the end
//! is checked unless it is 0 (Redis's `rdbchecksum no`).

use std::fmt;

/// The checksum Redis puts at the end of a file (CRC-64/Jones, reflected).
const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// Types of values, and opcodes, as `rdb.h` numbers them.
mod kind {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const SET_INTSET: u8 = 11;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const FUNCTION2: u8 = 245;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// Strings longer than this are refused (Redis's `proto-max-bulk-len`
/// default): a length past it is a corrupt file, not an allocation.
const MAX_STRING: usize = 512 << 20;

/// A value read from a file.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    ZSet(Vec<(Vec<u8>, f64)>),
}

/// A key read from a file: its database, its value, and when it expires
/// (Unix time in milliseconds).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Entry {
    pub db: usize,
    pub key: Vec<u8>,
    pub value: Value,
    pub expires_ms: Option<i64>,
}

/// Why a file could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct RdbError {
    /// Where in the file.
    pub offset: usize,
    pub what: String,
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad RDB file at byte {}: {}", self.offset, self.what)
    }
}

/// Builds an RDB file.
pub(super) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// The header and `aux` fields (name, value).
    pub(super) fn new(aux: &[(&str, &str)]) -> Writer {
        let mut w = Writer { buf: b"REDIS0010".to_vec() };
        for (name, value) in aux {
            w.buf.push(kind::AUX);
            w.string(name.as_bytes());
            w.string(value.as_bytes());
        }
        w
    }

    /// Starts database `n`, which has `keys` keys, `expires` of them with
    /// a time to live.
    pub(super) fn select_db(&mut self, n: usize, keys: usize, expires: usize) {
        self.buf.push(kind::SELECTDB);
        self.length(n as u64);
        self.buf.push(kind::RESIZEDB);
        self.length(keys as u64);
        self.length(expires as u64);
    }

    /// Starts key `key` of type `kind`, expiring at `expires_ms` (Unix
    /// milliseconds) if given.
    fn key(&mut self, kind: u8, key: &[u8], expires_ms: Option<i64>) {
        if let Some(ms) = expires_ms {
            self.buf.push(kind::EXPIRETIME_MS);
            self.buf.extend_from_slice(&ms.to_le_bytes());
        }
        self.buf.push(kind);
        self.string(key);
    }

    pub(super) fn string_value(&mut self, key: &[u8], value: &[u8], expires_ms: Option<i64>) {
        self.key(kind::STRING, key, expires_ms);
        self.string(value);
    }

    /// A list, a set or a hash (`items` flattened: field, value, ...): its
    /// count of elements (pairs, for a hash), then each.
    pub(super) fn collection<'i>(
        &mut self,
        kind: CollectionKind,
        key: &[u8],
        count: usize,
        items: impl Iterator<Item = &'i [u8]>,
        expires_ms: Option<i64>,
    ) {
        let code = match kind {
            CollectionKind::List => kind::LIST,
            CollectionKind::Set => kind::SET,
            CollectionKind::Hash => kind::HASH,
        };
        self.key(code, key, expires_ms);
        self.length(count as u64);
        for item in items {
            self.string(item);
        }
    }

    /// A sorted set, with binary scores.
    pub(super) fn zset<'i>(
        &mut self,
        key: &[u8],
        count: usize,
        members: impl Iterator<Item = (&'i [u8], f64)>,
        expires_ms: Option<i64>,
    ) {
        self.key(kind::ZSET_2, key, expires_ms);
        self.length(count as u64);
        for (member, score) in members {
            self.string(member);
            self.buf.extend_from_slice(&score.to_le_bytes());
        }
    }

    /// The end mark and checksum; the file.
    pub(super) fn finish(mut self) -> Vec<u8> {
        self.buf.push(kind::EOF);
        let crc = CRC.checksum(&self.buf);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf
    }

    fn length(&mut self, n: u64) {
        if n < 1 << 6 {
            self.buf.push(n as u8);
        } else if n < 1 << 14 {
            self.buf.extend_from_slice(&((n as u16) | 0x4000).to_be_bytes());
        } else if n <= u64::from(u32::MAX) {
            self.buf.push(0x80);
            self.buf.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            self.buf.push(0x81);
            self.buf.extend_from_slice(&n.to_be_bytes());
        }
    }

    fn string(&mut self, s: &[u8]) {
        self.length(s.len() as u64);
        self.buf.extend_from_slice(s);
    }
}

/// The plain collections [`Writer::collection`] writes.
#[derive(Clone, Copy)]
pub(super) enum CollectionKind {
    List,
    Set,
    Hash,
}

/// Reads a whole file: every key, in the order written. Keys of types
/// this server does not hold (streams, modules) and Redis functions are
/// errors that name them.
pub(super) fn read(file: &[u8]) -> Result<Vec<Entry>, RdbError> {
    let mut r = Reader { data: file, at: 0 };
    let magic = r.take(9)?;
    if &magic[..5] != b"REDIS" {
        return Err(r.error("not an RDB file (no REDIS header)"));
    }
    let version: u32 = std::str::from_utf8(&magic[5..]).ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    if !(1..=10).contains(&version) {
        return Err(r.error(&format!("RDB version {:?} (this server reads up to 10, Redis 7.0's)", &magic[5..])));
    }
    let mut entries = Vec::new();
    let (mut db, mut expires_ms) = (0usize, None);
    loop {
        let op = r.byte()?;
        match op {
            kind::EOF => break,
            kind::SELECTDB => {
                db = usize::try_from(r.length()?).map_err(|_| r.error("database number out of range"))?;
                if db >= super::DATABASES {
                    return Err(r.error(&format!("database {db} (this server has {})", super::DATABASES)));
                }
            }
            kind::RESIZEDB => {
                r.length()?;
                r.length()?;
            }
            kind::AUX => {
                r.string()?;
                r.string()?;
            }
            kind::EXPIRETIME_MS => expires_ms = Some(i64::from_le_bytes(r.array()?)),
            kind::EXPIRETIME => expires_ms = Some(i64::from(i32::from_le_bytes(r.array()?)).saturating_mul(1000)),
            kind::IDLE => {
                r.length()?;
            }
            kind::FREQ => {
                r.byte()?;
            }
            kind::FUNCTION2 => return Err(r.error("a Redis function library (this server runs no functions)")),
            kind::MODULE_AUX => return Err(r.error("module data (this server loads no modules)")),
            t => {
                let key = r.string()?;
                let value = r.value(t)?;
                entries.push(Entry { db, key, value, expires_ms: expires_ms.take() });
            }
        }
    }
    let body_end = r.at;
    if version >= 5 {
        let stored = u64::from_le_bytes(r.array()?);
        if stored != 0 && stored != CRC.checksum(&file[..body_end]) {
            return Err(RdbError { offset: body_end, what: "checksum mismatch".into() });
        }
    }
    Ok(entries)
}

/// A position in a file.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

/// A length, or the special encoding of a string that follows.
enum Length {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    fn error(&self, what: &str) -> RdbError {
        RdbError { offset: self.at, what: what.to_owned() }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| self.error("truncated"))?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }

    fn byte(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn length_or_encoding(&mut self) -> Result<Length, RdbError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Length::Plain(u64::from(first & 0x3f)),
            1 => Length::Plain(u64::from(first & 0x3f) << 8 | u64::from(self.byte()?)),
            2 if first == 0x80 => Length::Plain(u64::from(u32::from_be_bytes(self.array()?))),
            2 if first == 0x81 => Length::Plain(u64::from_be_bytes(self.array()?)),
            2 => return Err(self.error("unknown length encoding")),
            _ => Length::Encoded(first & 0x3f),
        })
    }

    fn length(&mut self) -> Result<u64, RdbError> {
        match self.length_or_encoding()? {
            Length::Plain(n) => Ok(n),
            Length::Encoded(_) => Err(self.error("an encoded string where a length belongs")),
        }
    }

    /// A count of things each at least `min_bytes` long: refused when the
    /// rest of the file could not hold them (so nothing allocates what a
    /// corrupt length claims).
    fn count(&mut self, min_bytes: usize) -> Result<usize, RdbError> {
        let n = self.length()?;
        let left = (self.data.len() - self.at) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return Err(self.error(&format!("a count of {n} in {left} bytes")));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.length_or_encoding()? {
            Length::Plain(n) => {
                let n = usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= MAX_STRING)
                    .ok_or_else(|| self.error("string too long"))?;
                Ok(self.take(n)?.to_vec())
            }
            Length::Encoded(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Length::Encoded(1) => Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Encoded(2) => Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Encoded(3) => {
                let compressed = usize::try_from(self.length()?).map_err(|_| self.error("LZF length"))?;
                let len = usize::try_from(self.length()?).map_err(|_| self.error("LZF length"))?;
                let at = self.at;
                let input = self.take(compressed)?;
                lzf_decompress(input, len).ok_or(RdbError { offset: at, what: "corrupt LZF string".into() })
            }
            Length::Encoded(e) => Err(self.error(&format!("unknown string encoding {e}"))),
        }
    }

    /// A score of the old sorted set type: its text, or 253-255 for NaN
    /// and the infinities.
    fn text_double(&mut self) -> Result<f64, RdbError> {
        match self.byte()? {
            253 => Err(self.error("a NaN score")),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let text = self.take(usize::from(n))?;
                std::str::from_utf8(text).ok().and_then(|t| t.parse().ok()).ok_or_else(|| self.error("a bad score"))
            }
        }
    }

    fn value(&mut self, t: u8) -> Result<Value, RdbError> {
        Ok(match t {
            kind::STRING => Value::String(self.string()?),
            kind::LIST | kind::SET => {
                let n = self.count(1)?;
                let items = (0..n).map(|_| self.string()).collect::<Result<_, _>>()?;
                if t == kind::LIST {
                    Value::List(items)
                } else {
                    Value::Set(items)
                }
            }
            kind::HASH => {
                let n = self.count(2)?;
                Value::Hash((0..n).map(|_| Ok((self.string()?, self.string()?))).collect::<Result<_, _>>()?)
            }
            kind::ZSET | kind::ZSET_2 => {
                let n = self.count(2)?;
                let mut members = Vec::with_capacity(n);
                for _ in 0..n {
                    let member = self.string()?;
                    let score = if t == kind::ZSET_2 { f64::from_le_bytes(self.array()?) } else { self.text_double()? };
                    if score.is_nan() {
                        return Err(self.error("a NaN score"));
                    }
                    members.push((member, score));
                }
                Value::ZSet(members)
            }
            kind::SET_INTSET => Value::Set(intset(&self.string()?).ok_or_else(|| self.error("corrupt intset"))?),
            kind::HASH_LISTPACK | kind::ZSET_LISTPACK => {
                let items = listpack(&self.string()?).ok_or_else(|| self.error("corrupt listpack"))?;
                if items.len() % 2 != 0 {
                    return Err(self.error("a listpack of pairs with an odd count"));
                }
                let mut pairs = items.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone()));
                if t == kind::HASH_LISTPACK {
                    Value::Hash(pairs.collect())
                } else {
                    let parse = |(m, s): (Vec<u8>, Vec<u8>)| -> Option<(Vec<u8>, f64)> {
                        let s: f64 = std::str::from_utf8(&s).ok()?.parse().ok()?;
                        (!s.is_nan()).then_some((m, s))
                    };
                    Value::ZSet(
                        pairs.by_ref().map(parse).collect::<Option<_>>().ok_or_else(|| self.error("a bad score"))?,
                    )
                }
            }
            kind::LIST_QUICKLIST_2 => {
                let nodes = self.count(2)?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    match self.length()? {
                        // PLAIN: one large element.
                        1 => items.push(self.string()?),
                        // PACKED: a listpack of elements.
                        2 => items.extend(listpack(&self.string()?).ok_or_else(|| self.error("corrupt listpack"))?),
                        c => return Err(self.error(&format!("quicklist node container {c}"))),
                    }
                }
                Value::List(items)
            }
            t => {
                let what = match t {
                    6 | 7 => "a module type",
                    9..=14 => "a pre-7.0 compact encoding (ziplist, zipmap, quicklist 1): save it again with Redis 7.0",
                    15 | 19 => "a stream (this server has no streams)",
                    _ => "an unknown type",
                };
                return Err(self.error(&format!("value type {t}: {what}")));
            }
        })
    }
}

/// The members of an intset (its integers, as decimal text).
fn intset(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    let width = u32::from_le_bytes(blob.get(0..4)?.try_into().ok()?) as usize;
    let count = u32::from_le_bytes(blob.get(4..8)?.try_into().ok()?) as usize;
    if !matches!(width, 2 | 4 | 8) || blob.len() != 8 + count.checked_mul(width)? {
        return None;
    }
    Some(
        blob[8..]
            .chunks_exact(width)
            .map(|c| {
                let v = match width {
                    2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
                    4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                    _ => i64::from_le_bytes(c.try_into().expect("8 bytes")),
                };
                v.to_string().into_bytes()
            })
            .collect(),
    )
}

/// The elements of a listpack (integers as decimal text): its 6-byte
/// header, entries each followed by its length backwards, and 0xFF.
fn listpack(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    let total = u32::from_le_bytes(blob.get(0..4)?.try_into().ok()?) as usize;
    if total != blob.len() || total < 7 || blob[total - 1] != 0xff {
        return None;
    }
    let mut at = 6;
    let mut out = Vec::new();
    let int = |bytes: &[u8], bits: u32| -> i64 {
        // Sign-extends `bits` of little-endian `bytes`.
        let mut v = 0u64;
        for (i, b) in bytes.iter().enumerate() {
            v |= u64::from(*b) << (8 * i);
        }
        let shift = 64 - bits;
        ((v << shift) as i64) >> shift
    };
    while blob[at] != 0xff {
        let b = blob[at];
        let (head, len) = match b {
            0x00..=0x7f => (1, 0),
            0x80..=0xbf => (1, usize::from(b & 0x3f)),
            0xc0..=0xdf => (2, 0),
            0xe0..=0xef => (2, (usize::from(b & 0x0f) << 8) | usize::from(*blob.get(at + 1)?)),
            0xf0 => (5, u32::from_le_bytes(blob.get(at + 1..at + 5)?.try_into().ok()?) as usize),
            0xf1 => (3, 0),
            0xf2 => (4, 0),
            0xf3 => (5, 0),
            0xf4 => (9, 0),
            _ => return None,
        };
        let data = blob.get(at + head..(at + head).checked_add(len)?)?;
        let value = match b {
            0x00..=0x7f => Some(i64::from(b)),
            0xc0..=0xdf => Some(int(&[*blob.get(at + 1)?, b & 0x1f], 13)),
            0xf1..=0xf4 => Some(int(blob.get(at + 1..at + head)?, 8 * (head as u32 - 1))),
            _ => None,
        };
        out.push(value.map_or_else(|| data.to_vec(), |v| v.to_string().into_bytes()));
        let entry = head + len;
        let backlen = match entry {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        at = at.checked_add(entry + backlen).filter(|&a| a < total)?;
    }
    (at == total - 1).then_some(out)
}

/// liblzf's decompression, bounds-checked: `input` must expand to exactly
/// `len` bytes. (The `lzf` crate is deprecated; this is the 20 lines of
/// its format Redis's files need.)
fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    // A back-reference of 3 bytes expands to at most 264: a claimed length
    // past that is corrupt, not an allocation to make.
    if len > input.len().saturating_mul(264) || len > MAX_STRING {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            // A literal run of ctrl + 1 bytes.
            let run = input.get(i..i + ctrl + 1)?;
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            // A back-reference: length (3 bits, or 7 plus a byte) + 2, and
            // distance (5 bits and a byte) + 1.
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*input.get(i)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            let from = out.len().checked_sub(back)?;
            for k in 0..n + 2 {
                let b = out[from + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn value() -> impl Strategy<Value = Value> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..80);
        prop_oneof![
            bytes().prop_map(Value::String),
            proptest::collection::vec(bytes(), 1..6).prop_map(Value::List),
            proptest::collection::vec(bytes(), 1..6).prop_map(Value::Set),
            proptest::collection::vec((bytes(), bytes()), 1..6).prop_map(Value::Hash),
            proptest::collection::vec((bytes(), -1e9f64..1e9), 1..6).prop_map(Value::ZSet),
        ]
    }

    fn entry() -> impl Strategy<Value = Entry> {
        (0..16usize, proptest::collection::vec(any::<u8>(), 1..20), value(), proptest::option::of(any::<i64>()))
            .prop_map(|(db, key, value, expires_ms)| Entry { db, key, value, expires_ms })
    }

    /// Writes `entries` (sorted by database) as SAVE would.
    fn write(entries: &[Entry]) -> Vec<u8> {
        let mut w = Writer::new(&[("redis-bits", "64")]);
        let mut current = None;
        for e in entries {
            if current != Some(e.db) {
                w.select_db(e.db, 0, 0);
                current = Some(e.db);
            }
            match &e.value {
                Value::String(v) => w.string_value(&e.key, v, e.expires_ms),
                Value::List(items) | Value::Set(items) => {
                    let kind =
                        if matches!(e.value, Value::List(_)) { CollectionKind::List } else { CollectionKind::Set };
                    w.collection(kind, &e.key, items.len(), items.iter().map(|i| &i[..]), e.expires_ms)
                }
                Value::Hash(pairs) => w.collection(
                    CollectionKind::Hash,
                    &e.key,
                    pairs.len(),
                    pairs.iter().flat_map(|(f, v)| [&f[..], &v[..]]),
                    e.expires_ms,
                ),
                Value::ZSet(m) => w.zset(&e.key, m.len(), m.iter().map(|(m, s)| (&m[..], *s)), e.expires_ms),
            }
        }
        w.finish()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

        /// What the writer writes, the reader reads back, key by key.
        #[test]
        fn files_read_back_what_was_written(mut entries in proptest::collection::vec(entry(), 0..12)) {
            entries.sort_by_key(|e| e.db);
            let file = write(&entries);
            prop_assert_eq!(read(&file), Ok(entries));
        }

        /// A file cut short or with a byte changed is an error or a
        /// reading of some keys, never a panic.
        #[test]
        fn damaged_files_never_panic(
            entries in proptest::collection::vec(entry(), 1..6),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            to in any::<u8>(),
        ) {
            let file = write(&entries);
            let _ = read(&file[..cut.index(file.len())]);
            let mut changed = file.clone();
            let at = flip.index(changed.len());
            changed[at] = to;
            if changed != file {
                // Never read as if nothing had changed (the checksum
                // catches what the structure does not).
                prop_assert_ne!(read(&changed), read(&file));
            }
        }

        /// Arbitrary listpacks, intsets and LZF streams are rejected or read,
        /// never a panic or a read past their end.
        #[test]
        fn arbitrary_encodings_never_panic(blob in proptest::collection::vec(any::<u8>(), 0..64), len in 0usize..600) {
            let _ = listpack(&blob);
            let _ = intset(&blob);
            let _ = lzf_decompress(&blob, len);
        }
    }

    #[test]
    fn lzf_runs_and_back_references_expand() {
        // A literal run of 3 ("abc"), then 7 bytes from 3 back (0xA0: a
        // length of 5 + 2, distance 2 + 1), overlapping what it writes.
        let literal_then_ref = [2u8, b'a', b'b', b'c', 0xa0, 2];
        assert_eq!(lzf_decompress(&literal_then_ref, 10).as_deref(), Some(&b"abcabcabca"[..]));
        assert_eq!(lzf_decompress(&literal_then_ref, 11), None, "the length must match");
        assert_eq!(lzf_decompress(&[0, b'x', 0x20, 5], 4), None, "a reference before the start");
    }

    #[test]
    fn listpack_entries_of_each_encoding_read_as_redis_writes_them() {
        // Built as lpInsert lays them out: header, entries with backlens, end.
        let mut entries: Vec<u8> = Vec::new();
        entries.extend([0x05, 1]); // 7-bit uint 5
        entries.extend([0x83, b'a', b'b', b'c', 4]); // 6-bit string "abc"
        entries.extend([0xdf, 0xff, 2]); // 13-bit int -1
        entries.extend([0xf1, 0x00, 0x80, 3]); // int16 -32768
        entries.extend([0xf4]);
        entries.extend(i64::MIN.to_le_bytes());
        entries.push(9);
        let total = 6 + entries.len() + 1;
        let mut blob = (total as u32).to_le_bytes().to_vec();
        blob.extend(5u16.to_le_bytes());
        blob.extend(entries);
        blob.push(0xff);
        let want: Vec<Vec<u8>> =
            ["5", "abc", "-1", "-32768", &i64::MIN.to_string()].iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(listpack(&blob), Some(want));
    }
}
