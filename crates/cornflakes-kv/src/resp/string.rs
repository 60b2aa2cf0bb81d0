//! String commands beyond GET and SET: GETRANGE (SUBSTR), SETRANGE,
//! MSETNX and INCRBYFLOAT, with Redis 7.0's replies and errors.

use std::borrow::Cow;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;

use super::long_double::{LongDouble, NOT_A_FLOAT};
use super::{arity_error, integer_arg, status_error, RespDb, NOT_INTEGER};
use crate::protocol::Status;

impl RespDb {
    /// Runs string command `name` (its arity checked).
    pub(super) fn string_command(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        match name {
            "getrange" | "substr" => {
                let (Some(start), Some(end)) = (integer_arg(&args[1]), integer_arg(&args[2])) else {
                    return reply.error(NOT_INTEGER);
                };
                match self.string(&args[0]) {
                    Err(e) => reply.error(e),
                    Ok(v) => {
                        let v = v.map_or(&[][..], |v| v.as_slice());
                        match substring(v.len(), start, end) {
                            Some((a, b)) => reply.bulk(&v[a..=b]),
                            None => reply.bulk(b""),
                        }
                    }
                }
            }
            "setrange" => self.setrange(args, reply),
            "incrbyfloat" => self.incr_by_float(args, reply),
            "msetnx" => {
                if !args.len().is_multiple_of(2) {
                    return reply.error(&arity_error(name));
                }
                if let Some(s) = args.chunks(2).find_map(|kv| self.store.check_put(&kv[0], &[&kv[1]]).err()) {
                    return reply.error(status_error(s));
                }
                if args.chunks(2).any(|kv| self.kind(&kv[0]).is_some()) {
                    return reply.integer(0);
                }
                for kv in args.chunks(2) {
                    if let Err(s) = self.set_string(&kv[0], &kv[1]) {
                        return reply.error(status_error(s));
                    }
                }
                reply.integer(1)
            }
            _ => unreachable!("not a string command: {name}"),
        }
    }

    /// `INCRBYFLOAT key increment`: added in `long double`, as Redis adds
    /// (see [`LongDouble`]), the key's time to live kept.
    fn incr_by_float(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        let current = match self.string(key) {
            Err(e) => return reply.error(e),
            Ok(None) => LongDouble::ZERO,
            Ok(Some(v)) => match LongDouble::parse(v) {
                Some(x) => x,
                None => return reply.error(NOT_A_FLOAT),
            },
        };
        let Some(by) = LongDouble::parse(&args[1]) else { return reply.error(NOT_A_FLOAT) };
        let Some(next) = current.checked_add(by) else {
            return reply.error("ERR increment would produce NaN or Infinity");
        };
        let text = next.to_string();
        match self.replace_string(key, text.as_bytes()) {
            Ok(()) => reply.bulk(text.as_bytes()),
            Err(s) => reply.error(status_error(s)),
        }
    }

    /// `SETRANGE key offset value`: overwrites from `offset`, padding with
    /// zero bytes; keeps the time to live. A new buffer is swapped in, so a
    /// reply still sending the old value is unchanged.
    fn setrange(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        let Some(offset) = integer_arg(&args[1]) else { return reply.error(NOT_INTEGER) };
        if offset < 0 {
            return reply.error("ERR offset is out of range");
        }
        let value = &args[2][..];
        let old = match self.string(key) {
            Err(e) => return reply.error(e),
            Ok(v) => v.map(|v| v.as_slice().to_vec()),
        };
        if value.is_empty() {
            return reply.integer(old.map_or(0, |v| v.len() as i64));
        }
        self.setrange_into(key, old.unwrap_or_default(), offset as usize, value, reply)
    }

    fn setrange_into(&mut self, key: &[u8], mut text: Vec<u8>, offset: usize, value: &[u8], reply: &mut Reply<RcBuf>) {
        let Some(end) = offset.checked_add(value.len()).filter(|&e| e <= self.store.limits().max_value) else {
            return reply.error(status_error(Status::TooLarge));
        };
        if text.len() < end {
            text.resize(end, 0);
        }
        text[offset..end].copy_from_slice(value);
        let ttl = self.expires.get(key).copied();
        match self.set_string(key, &text) {
            Ok(()) => {
                if let Some(at) = ttl {
                    self.expires.insert(key.into(), at);
                }
                reply.integer(text.len() as i64)
            }
            Err(s) => reply.error(status_error(s)),
        }
    }
}

/// The bytes `start..=end` of a string of `len` select, as Redis 7.0's
/// GETRANGE computes them; `None` when empty.
fn substring(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let n = len as i64;
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let start = if start < 0 { (n + start).max(0) } else { start };
    let end = if end < 0 { (n + end).max(0) } else { end.min(n - 1) };
    (n > 0 && start <= end).then_some((start as usize, end as usize))
}
