//! Writing RESP2 replies as parts to send, with Cornflakes' hybrid rule:
//! framing and short values are copied into runs of contiguous bytes;
//! values of at least the threshold are referenced, to be sent from the
//! application's buffers (scatter-gather, zero-copy).

use std::ops::Range;

/// One part of a reply, in wire order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part<V> {
    /// Bytes copied into the reply (a range of [`Reply::copied`]).
    Copied(Range<usize>),
    /// A value sent by reference.
    Value(V),
}

/// A reply (or several pipelined replies) being built.
///
/// # Examples
///
/// ```
/// use cornflakes_resp::{Part, Reply};
///
/// let big = vec![b'x'; 1000];
/// let mut r: Reply<&[u8]> = Reply::new(512);
/// r.array(2);
/// r.bulk(b"small");
/// r.bulk_value(&big[..]);
/// assert_eq!(r.parts().len(), 3); // "*2\r\n$5\r\nsmall\r\n$1000\r\n", the value, "\r\n"
/// assert!(matches!(r.parts()[1], Part::Value(v) if v.len() == 1000));
/// assert_eq!(r.len(), 4 + 11 + 7 + 1000 + 2);
/// ```
#[derive(Clone, Debug)]
pub struct Reply<V> {
    copied: Vec<u8>,
    parts: Vec<Part<V>>,
    threshold: usize,
    /// Errors written since the reply was made (not reset by `clear`).
    errors: u64,
    /// Where the text of the last error since `clear` is in `copied`.
    last_error: Option<std::ops::Range<usize>>,
}

impl<V: AsRef<[u8]>> Reply<V> {
    /// An empty reply whose values of at least `threshold` bytes are
    /// referenced (`usize::MAX`: copy everything).
    pub fn new(threshold: usize) -> Self {
        Reply { copied: Vec::new(), parts: Vec::new(), threshold, errors: 0, last_error: None }
    }

    /// The size from which values are referenced, not copied.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Empties the reply, keeping its memory.
    pub fn clear(&mut self) {
        self.copied.clear();
        self.parts.clear();
        self.last_error = None;
    }

    /// How many errors ([`error`](Self::error)) were written since the
    /// reply was made, [`clear`](Self::clear) or not (a server counts
    /// them per command: Redis's `failed_calls` and `errorstats`).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// The text of the last error written since the last
    /// [`clear`](Self::clear), without its `-` and line end.
    ///
    /// ```
    /// use cornflakes_resp::Reply;
    ///
    /// let mut r: Reply<&[u8]> = Reply::new(512);
    /// r.error("WRONGTYPE Operation against a key holding the wrong kind of value");
    /// r.simple("OK");
    /// assert_eq!(r.errors(), 1);
    /// assert!(r.last_error().is_some_and(|e| e.starts_with(b"WRONGTYPE ")));
    /// r.clear();
    /// assert_eq!((r.errors(), r.last_error()), (1, None));
    /// ```
    pub fn last_error(&self) -> Option<&[u8]> {
        self.last_error.clone().map(|r| &self.copied[r])
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The copied bytes that [`Part::Copied`] ranges index.
    pub fn copied(&self) -> &[u8] {
        &self.copied
    }

    /// The parts, in wire order.
    pub fn parts(&self) -> &[Part<V>] {
        &self.parts
    }

    /// Bytes on the wire.
    pub fn len(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Copied(r) => r.len(),
                Part::Value(v) => v.as_ref().len(),
            })
            .sum()
    }

    /// The whole reply as one vector (tests, debugging).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for p in &self.parts {
            match p {
                Part::Copied(r) => out.extend_from_slice(&self.copied[r.clone()]),
                Part::Value(v) => out.extend_from_slice(v.as_ref()),
            }
        }
        out
    }

    /// Appends copied bytes, extending the last copied run when it is the
    /// last part.
    fn copy(&mut self, bytes: &[u8]) {
        let start = self.copied.len();
        self.copied.extend_from_slice(bytes);
        let end = self.copied.len();
        match self.parts.last_mut() {
            Some(Part::Copied(r)) if r.end == start => r.end = end,
            _ => self.parts.push(Part::Copied(start..end)),
        }
    }

    fn line(&mut self, prefix: u8, n: i64) {
        let mut buf = [0u8; 24];
        buf[0] = prefix;
        let digits = format_i64(n, &mut buf[1..22]);
        let len = 1 + digits;
        buf[len] = b'\r';
        buf[len + 1] = b'\n';
        self.copy(&buf[..len + 2]);
    }

    /// Appends bytes that are already RESP: a message encoded once and
    /// sent to several clients (pub/sub). Copied.
    pub fn raw(&mut self, encoded: &[u8]) {
        self.copy(encoded);
    }

    /// Appends every part of `other` (a reply built elsewhere, queued
    /// behind this one): copied runs copied, values referenced again.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_resp::Reply;
    ///
    /// let big = vec![b'x'; 1000];
    /// let (mut a, mut b): (Reply<&[u8]>, Reply<&[u8]>) = (Reply::new(512), Reply::new(512));
    /// a.integer(1);
    /// b.bulk_value(&big[..]);
    /// b.simple("OK");
    /// a.append(&b);
    /// assert_eq!(a.parts().len(), 3); // ":1\r\n$1000\r\n", the value, "\r\n+OK\r\n"
    /// assert_eq!(a.to_vec(), [&b":1\r\n"[..], &b.to_vec()].concat());
    /// ```
    pub fn append(&mut self, other: &Reply<V>)
    where
        V: Clone,
    {
        for part in &other.parts {
            match part {
                Part::Copied(r) => self.copy(&other.copied[r.clone()]),
                Part::Value(v) => self.parts.push(Part::Value(v.clone())),
            }
        }
    }

    /// `+<text>\r\n`. `text` must not contain `\r` or `\n` (they are
    /// replaced by spaces, as Redis does for status replies).
    pub fn simple(&mut self, text: &str) {
        self.copy(b"+");
        self.text(text);
    }

    /// `-<text>\r\n`, e.g. `ERR unknown command 'foo'`.
    pub fn error(&mut self, text: &str) {
        self.copy(b"-");
        let start = self.copied.len();
        self.text(text);
        self.errors += 1;
        self.last_error = Some(start..self.copied.len() - 2);
    }

    fn text(&mut self, text: &str) {
        for chunk in text.as_bytes().split(|&b| b == b'\r' || b == b'\n') {
            self.copy(chunk);
            self.copy(b" ");
        }
        // One space too many was appended after the last chunk.
        self.copied.pop();
        if let Some(Part::Copied(r)) = self.parts.last_mut() {
            r.end -= 1;
        }
        self.copy(b"\r\n");
    }

    /// `:<n>\r\n`.
    pub fn integer(&mut self, n: i64) {
        self.line(b':', n);
    }

    /// `$-1\r\n`, the null bulk string.
    pub fn null(&mut self) {
        self.copy(b"$-1\r\n");
    }

    /// `*-1\r\n`, the null array (LPOP with a count, of a missing key).
    pub fn null_array(&mut self) {
        self.copy(b"*-1\r\n");
    }

    /// `*<n>\r\n`, the header of an array of `n` replies that follow.
    pub fn array(&mut self, n: usize) {
        self.line(b'*', n as i64);
    }

    /// `$<len>\r\n<bytes>\r\n`, copied.
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.line(b'$', bytes.len() as i64);
        self.copy(bytes);
        self.copy(b"\r\n");
    }

    /// `$<len>\r\n<value>\r\n`: the value is referenced when it is at least
    /// the threshold, copied otherwise.
    pub fn bulk_value(&mut self, value: V) {
        let len = value.as_ref().len();
        if len >= self.threshold {
            self.line(b'$', len as i64);
            self.parts.push(Part::Value(value));
            self.copy(b"\r\n");
        } else {
            self.bulk(value.as_ref());
        }
    }
}

/// Writes `n` in decimal into `out` (at least 20 bytes); returns the
/// number of bytes written.
fn format_i64(n: i64, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 20];
    let mut v = n.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = 0;
    if n < 0 {
        out[0] = b'-';
        len = 1;
    }
    let d = &digits[i..];
    out[len..len + d.len()].copy_from_slice(d);
    len + d.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_type_as_redis_writes_it() {
        let mut r: Reply<Vec<u8>> = Reply::new(usize::MAX);
        r.simple("OK");
        r.error("ERR wrong number of arguments for 'get' command");
        r.integer(0);
        r.integer(-42);
        r.integer(i64::MIN);
        r.null();
        r.array(2);
        r.bulk(b"");
        r.bulk_value(b"v".to_vec());
        r.simple("two\r\nlines");
        assert_eq!(
            r.to_vec(),
            b"+OK\r\n-ERR wrong number of arguments for 'get' command\r\n:0\r\n:-42\r\n:-9223372036854775808\r\n$-1\r\n*2\r\n$0\r\n\r\n$1\r\nv\r\n+two  lines\r\n"
                .to_vec()
        );
        assert_eq!(r.parts().len(), 1, "all copied into one run");
    }

    #[test]
    fn values_at_the_threshold_are_referenced_and_framed() {
        let small = vec![1u8; 511];
        let big = vec![2u8; 512];
        let mut r: Reply<&[u8]> = Reply::new(512);
        r.array(3);
        r.bulk_value(&small);
        r.bulk_value(&big);
        r.bulk_value(&big);
        let kinds: Vec<bool> = r.parts().iter().map(|p| matches!(p, Part::Value(_))).collect();
        assert_eq!(kinds, [false, true, false, true, false]);
        let mut expected = b"*3\r\n$511\r\n".to_vec();
        expected.extend(&small);
        expected.extend(b"\r\n$512\r\n");
        expected.extend(&big);
        expected.extend(b"\r\n$512\r\n");
        expected.extend(&big);
        expected.extend(b"\r\n");
        assert_eq!(r.to_vec(), expected);
        assert_eq!(r.len(), expected.len());
        r.clear();
        assert!(r.is_empty() && r.to_vec().is_empty());
    }

    #[test]
    fn replies_parse_back_with_the_request_parser_where_the_shapes_match() {
        // An array of bulk strings is also a valid multibulk request.
        let mut r: Reply<&[u8]> = Reply::new(4);
        r.array(3);
        r.bulk_value(b"SET");
        r.bulk_value(b"key");
        r.bulk_value(b"a longer value");
        let wire = r.to_vec();
        let (cmd, used) = crate::parse_command(&wire, &crate::Limits::default()).unwrap().unwrap();
        assert_eq!(used, wire.len());
        assert_eq!(cmd.args.iter().map(|a| a.to_vec()).collect::<Vec<_>>(), [&b"SET"[..], b"key", b"a longer value"]);
    }
}
