//! Encoding: the size pass (`*_len`, which also caches nested lengths) and
//! the write pass (`put_*`), one call per field from generated code.

use std::cell::Cell;

use super::codec::{varint_len, ScalarCodec, WireType};
use super::{BytesField, ProtoImpl, Tally};
use crate::field::CfBytes;
use crate::mem::RcBuf;

/// A message's encoded length as the last size pass computed it (protobuf
/// C++'s `cached_size`), so that the write pass never computes a nested
/// length again. Compares equal to any other and clones as empty: it is
/// not part of the message's value.
#[derive(Default)]
pub struct CachedSize(Cell<usize>);

impl CachedSize {
    /// The stored length.
    #[inline(always)]
    pub fn get(&self) -> usize {
        self.0.get()
    }
    /// Stores a length.
    #[inline(always)]
    pub fn set(&self, len: usize) {
        self.0.set(len);
    }
}

impl Clone for CachedSize {
    fn clone(&self) -> Self {
        CachedSize::default()
    }
}

impl PartialEq for CachedSize {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for CachedSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CachedSize({})", self.get())
    }
}

/// Writes the copied bytes of a message and reports each zero-copy
/// payload with the offset it follows. Writes are bounds-checked slices:
/// a size pass that disagrees with the write (a bug, or a message changed
/// in between) panics instead of corrupting memory.
pub struct ProtoWriter<'b, F> {
    buf: &'b mut [u8],
    pos: usize,
    on_zero_copy: F,
}

impl<'b, F: FnMut(usize, &RcBuf)> ProtoWriter<'b, F> {
    pub(crate) fn new(buf: &'b mut [u8], on_zero_copy: F) -> Self {
        ProtoWriter { buf, pos: 0, on_zero_copy }
    }

    /// Bytes written so far.
    #[inline(always)]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Writes bytes as they are (a precomputed key).
    #[inline(always)]
    pub fn put_raw(&mut self, bytes: &[u8]) {
        let end = self.pos + bytes.len();
        self.buf[self.pos..end].copy_from_slice(bytes);
        self.pos = end;
    }

    /// Writes a varint.
    #[inline(always)]
    pub fn put_varint(&mut self, mut v: u64) {
        if v < 0x80 {
            self.buf[self.pos] = v as u8;
            self.pos += 1;
            return;
        }
        let out = &mut self.buf[self.pos..];
        let mut i = 0;
        while v >= 0x80 {
            out[i] = (v as u8) | 0x80;
            v >>= 7;
            i += 1;
        }
        out[i] = v as u8;
        self.pos += i + 1;
    }

    /// Writes 4 little-endian bytes.
    #[inline(always)]
    pub fn put_fixed32(&mut self, v: u32) {
        self.put_raw(&v.to_le_bytes());
    }

    /// Writes 8 little-endian bytes.
    #[inline(always)]
    pub fn put_fixed64(&mut self, v: u64) {
        self.put_raw(&v.to_le_bytes());
    }

    /// Writes a length-delimited payload: copied, or reported as a
    /// zero-copy segment that follows what has been written so far.
    #[inline(always)]
    fn put_payload(&mut self, field: &CfBytes<'_>) {
        match field {
            CfBytes::Copied(data) => self.put_raw(data),
            CfBytes::ZeroCopy(buf) => (self.on_zero_copy)(self.pos, buf),
        }
    }
}

/// Size of a singular scalar field with a key of `key_len` bytes.
#[inline(always)]
pub fn scalar_len<C: ScalarCodec>(key_len: usize, v: C::Value) -> usize {
    key_len + C::encoded_len(v)
}

/// Writes a singular scalar field.
#[inline(always)]
pub fn put_scalar<C: ScalarCodec, F: FnMut(usize, &RcBuf)>(w: &mut ProtoWriter<'_, F>, key: &[u8], v: C::Value) {
    w.put_raw(key);
    C::put(w, v);
}

#[inline(always)]
fn packed_body<C: ScalarCodec>(values: &[C::Value]) -> usize {
    match C::WIRE_TYPE {
        WireType::Fixed32 => 4 * values.len(),
        WireType::Fixed64 => 8 * values.len(),
        _ => values.iter().map(|&v| C::encoded_len(v)).sum(),
    }
}

/// Size of a packed repeated scalar field (nothing when empty).
#[inline]
pub fn packed_len<C: ScalarCodec>(key_len: usize, values: &[C::Value]) -> usize {
    if values.is_empty() {
        return 0;
    }
    let body = packed_body::<C>(values);
    key_len + varint_len(body as u64) + body
}

/// Writes a packed repeated scalar field (nothing when empty). The body's
/// length is summed again: for varints that is one `varint_len` per element,
/// as prost does, cheaper than caching it.
#[inline]
pub fn put_packed<C: ScalarCodec, F: FnMut(usize, &RcBuf)>(
    w: &mut ProtoWriter<'_, F>,
    key: &[u8],
    values: &[C::Value],
) {
    if values.is_empty() {
        return;
    }
    w.put_raw(key);
    w.put_varint(packed_body::<C>(values) as u64);
    for &v in values {
        C::put(w, v);
    }
}

/// Size of an unpacked repeated scalar field (`[packed = false]`).
#[inline]
pub fn unpacked_len<C: ScalarCodec>(key_len: usize, values: &[C::Value]) -> usize {
    key_len * values.len() + packed_body::<C>(values)
}

/// Writes an unpacked repeated scalar field.
#[inline]
pub fn put_unpacked<C: ScalarCodec, F: FnMut(usize, &RcBuf)>(
    w: &mut ProtoWriter<'_, F>,
    key: &[u8],
    values: &[C::Value],
) {
    for &v in values {
        w.put_raw(key);
        C::put(w, v);
    }
}

/// Size of a `bytes`/`string` field (or element); a zero-copy payload is
/// also counted in `tally`.
#[inline(always)]
pub fn bytes_len<'a, B: BytesField<'a>>(key_len: usize, field: &B, tally: &mut Tally) -> usize {
    let b = field.cf_bytes();
    let len = b.len();
    if b.is_zero_copy() {
        tally.zero_copy_len += len;
        tally.zero_copy_entries += 1;
    }
    key_len + varint_len(len as u64) + len
}

/// Writes a `bytes`/`string` field (or element): key and length copied,
/// the payload copied or reported as zero-copy.
#[inline(always)]
pub fn put_bytes<'a, B: BytesField<'a>, F: FnMut(usize, &RcBuf)>(w: &mut ProtoWriter<'_, F>, key: &[u8], field: &B) {
    let b = field.cf_bytes();
    w.put_raw(key);
    w.put_varint(b.len() as u64);
    w.put_payload(b);
}

/// Size of a nested message field (or element); caches the nested length.
#[inline(always)]
pub fn message_len<'a, M: ProtoImpl<'a>>(key_len: usize, m: &M, tally: &mut Tally) -> usize {
    let body = m.pw_size(tally);
    key_len + varint_len(body as u64) + body
}

/// Writes a nested message field (or element), with the length cached by
/// the size pass.
#[inline(always)]
pub fn put_message<'a, M: ProtoImpl<'a>, F: FnMut(usize, &RcBuf)>(w: &mut ProtoWriter<'_, F>, key: &[u8], m: &M) {
    w.put_raw(key);
    w.put_varint(m.pw_cached_size() as u64);
    m.pw_write(w);
}
