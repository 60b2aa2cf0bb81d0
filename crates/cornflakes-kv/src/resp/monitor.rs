//! MONITOR, as Redis 7.0 has it: every command the server runs, as it runs
//! it, to each connection that asked: `+<unix time> [<db> <client
//! address>] "name" "arg" ...`, arguments quoted as Redis's `sdscatrepr`
//! quotes them, passwords (AUTH, HELLO's AUTH) shown as `(redacted)`.
//! Commands refused before they run (unknown, wrong arity, NOAUTH, OOM),
//! commands queued by MULTI (shown when EXEC runs them, before EXEC) and
//! admin commands (CONFIG, SAVE, SHUTDOWN, ...) are not shown, as in Redis.
//! The lines go out as published messages do, so a monitor that reads
//! nothing is disconnected past the same limit.

use std::borrow::Cow;
use std::fmt::Write;
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{RespDb, Session};

impl RespDb {
    /// `MONITOR`: connection `session` receives every command from now on.
    pub(super) fn start_monitor(&mut self, session: &Session) {
        if !self.monitors.contains(&session.id) {
            self.monitors.push(session.id);
        }
    }

    /// Connection `id` no longer monitors (it has gone, or RESET).
    pub(super) fn stop_monitor(&mut self, id: u64) {
        if !self.monitors.is_empty() {
            self.monitors.retain(|&m| m != id);
        }
    }

    /// Whether connection `id` monitors (CLIENT LIST's `O`).
    pub(super) fn is_monitor(&self, id: u64) -> bool {
        self.monitors.contains(&id)
    }

    /// Shows command `args` that `session` ran to every monitor.
    pub(super) fn feed_monitors(&mut self, session: &Session, args: &[Cow<'_, [u8]>]) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut line =
            format!("+{}.{:06} [{} {}]", now.as_secs(), now.subsec_micros(), session.db, self.peer_text(session.id));
        let name = args.first().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
        for (i, arg) in args.iter().enumerate() {
            line.push(' ');
            if secret(&name, args, i) {
                line.push_str("\"(redacted)\"");
            } else {
                quote(&mut line, arg);
            }
        }
        line.push_str("\r\n");
        let message: Rc<[u8]> = Rc::from(line.into_bytes());
        for i in 0..self.monitors.len() {
            self.queue_message(self.monitors[i], message.clone());
        }
    }
}

/// Whether argument `i` of command `args` (`name` lowercased) is a
/// password: AUTH's arguments, and the two after HELLO's AUTH.
pub(super) fn secret(name: &[u8], args: &[Cow<'_, [u8]>], i: usize) -> bool {
    match name {
        b"auth" => i > 0,
        b"hello" => (1..i).any(|a| args[a].eq_ignore_ascii_case(b"auth") && i <= a + 2),
        _ => false,
    }
}

/// Appends `arg` as Redis's `sdscatrepr` writes it: in double quotes, `\`
/// and `"` escaped, `\n \r \t \a \b` by name, other unprintable bytes as
/// `\xHH`.
fn quote(out: &mut String, arg: &[u8]) {
    out.push('"');
    for &b in arg {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_as_sdscatrepr_quotes_them() {
        let mut s = String::new();
        quote(&mut s, b"a b\"c\\d\n\r\t\x07\x08\x01\xff~");
        assert_eq!(s, r#""a b\"c\\d\n\r\t\a\b\x01\xff~""#);
    }

    #[test]
    fn passwords_are_redacted() {
        let args: Vec<Cow<'_, [u8]>> = ["HELLO", "2", "AUTH", "default", "pw", "SETNAME", "x"]
            .iter()
            .map(|a| Cow::Borrowed(a.as_bytes()))
            .collect();
        let hidden: Vec<usize> = (0..args.len()).filter(|&i| secret(b"hello", &args, i)).collect();
        assert_eq!(hidden, [3, 4]);
        assert!(secret(b"auth", &args, 1) && !secret(b"auth", &args, 0));
        assert!(!secret(b"set", &args, 1));
    }
}
