//! Parsing RESP2 requests from a byte stream, as Redis does
//! (`processMultibulkBuffer` and `processInlineBuffer` in Redis's
//! `networking.c`): the same accepted inputs, the same error texts, and
//! limits checked before anything is allocated.

use std::borrow::Cow;

use smallvec::SmallVec;

/// The arguments of one command; the first is the command's name.
/// Multibulk arguments borrow the input; inline ones are owned when
/// quoting changed their bytes.
pub type Args<'a> = SmallVec<[Cow<'a, [u8]>; 8]>;

/// One parsed command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command<'a> {
    /// Name and arguments, never empty.
    pub args: Args<'a>,
}

impl Command<'_> {
    /// The command's name as sent (any case).
    pub fn name(&self) -> &[u8] {
        &self.args[0]
    }

    /// Whether the command is `name`, compared without regard to ASCII case
    /// (as Redis looks commands up).
    pub fn is(&self, name: &str) -> bool {
        self.name().eq_ignore_ascii_case(name.as_bytes())
    }
}

/// What a client may send, at most. Defaults are Redis 7's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk argument (`proto-max-bulk-len`, 512 MiB).
    pub max_bulk_len: usize,
    /// Most arguments in one multibulk command (1 Mi).
    pub max_args: usize,
    /// Longest inline command, and longest length line (64 KiB,
    /// `PROTO_INLINE_MAX_SIZE`).
    pub max_inline_len: usize,
    /// Most bytes held for one incomplete command (`client-query-buffer-limit`,
    /// 1 GiB).
    pub max_query_buffer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk_len: 512 << 20, max_args: 1 << 20, max_inline_len: 64 << 10, max_query_buffer: 1 << 30 }
    }
}

/// Why a request stream cannot be parsed. Redis replies with
/// `-ERR Protocol error: <text>` (the [`Display`](std::fmt::Display) form
/// here is that text without the `-ERR ` prefix) and closes the connection;
/// a full query buffer closes it without a reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// A multibulk count that is not a number or out of range.
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// A bulk length that is not a number or out of range.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// Something other than `$` where a bulk argument starts.
    #[error("Protocol error: expected '$', got '{0}'")]
    ExpectedDollar(char),
    /// A multibulk count line longer than the inline limit.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMultibulkCount,
    /// A bulk length line longer than the inline limit.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// An inline command longer than the inline limit.
    #[error("Protocol error: too big inline request")]
    TooBigInline,
    /// An inline command whose quotes do not close.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// An incomplete command holds more than the query buffer limit.
    #[error("query buffer limit reached ({0} bytes)")]
    QueryBufferFull(usize),
}

/// Parses the first command in `buf`. `Ok(None)`: `buf` holds no complete
/// command yet (keep the bytes, read more). `Ok(Some((command, used)))`:
/// the command, and how many bytes of `buf` it took (empty commands and
/// blank inline lines before it are consumed too). An error means the
/// stream is unusable: reply with the error and close.
///
/// # Examples
///
/// ```
/// use cornflakes_resp::{parse_command, Limits};
///
/// let buf = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\nPING\r\n";
/// let (cmd, used) = parse_command(buf, &Limits::default()).unwrap().unwrap();
/// assert!(cmd.is("get") && &cmd.args[1][..] == b"key");
/// let (cmd, _) = parse_command(&buf[used..], &Limits::default()).unwrap().unwrap();
/// assert!(cmd.is("PING"));
/// assert_eq!(parse_command(b"*2\r\n$3\r\nGE", &Limits::default()), Ok(None));
/// ```
pub fn parse_command<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<(Command<'a>, usize)>, ProtocolError> {
    Ok(match next_command(buf, limits)? {
        Next::Command(cmd, used) => Some((cmd, used)),
        Next::Incomplete { .. } => None,
    })
}

/// What [`next_command`] found at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// A command, and the bytes it took (as [`parse_command`]).
    Command(Command<'a>, usize),
    /// No complete command yet, and nothing can complete before the buffer
    /// holds `need` bytes: a server that keeps the bytes of an unfinished
    /// command need not parse them again until then (a 1 MiB argument read
    /// 64 KiB at a time would otherwise be parsed from its start sixteen
    /// times).
    Incomplete {
        /// The least length of the buffer at which a command can be complete.
        need: usize,
    },
}

/// [`parse_command`], also saying how many bytes an unfinished command
/// needs at least.
///
/// # Errors
///
/// As [`parse_command`].
///
/// # Examples
///
/// ```
/// use cornflakes_resp::parse::{next_command, Next};
/// use cornflakes_resp::Limits;
///
/// // A 10-byte argument of which 2 bytes have arrived: 8 more and the `\r\n`.
/// let buf = b"*1\r\n$10\r\nab";
/// assert_eq!(next_command(buf, &Limits::default()), Ok(Next::Incomplete { need: buf.len() + 10 }));
/// ```
pub fn next_command<'a>(buf: &'a [u8], limits: &Limits) -> Result<Next<'a>, ProtocolError> {
    let mut at = 0;
    loop {
        let rest = &buf[at..];
        if rest.is_empty() {
            return Ok(Next::Incomplete { need: buf.len() + 1 });
        }
        let parsed = if rest[0] == b'*' { multibulk(rest, limits)? } else { inline(rest, limits)? };
        match parsed {
            Parsed::Incomplete(need) => {
                if rest.len() > limits.max_query_buffer {
                    return Err(ProtocolError::QueryBufferFull(rest.len()));
                }
                return Ok(Next::Incomplete { need: at + need });
            }
            Parsed::Empty(used) => at += used,
            Parsed::Command(args, used) => return Ok(Next::Command(Command { args }, at + used)),
        }
    }
}

enum Parsed<'a> {
    /// No complete command: it needs a buffer of at least this length.
    Incomplete(usize),
    /// A command without arguments (`*0`, `*-1`, a blank line): skipped.
    Empty(usize),
    Command(Args<'a>, usize),
}

/// The line at the start of `buf` (without its `\r\n`) and the bytes it
/// takes with it; `None` when no `\r\n` has arrived.
fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    Some((&buf[..end], end + 2))
}

/// A decimal integer as Redis's `string2ll` accepts it: optional `-`, no
/// `+`, no leading zeros, no spaces, within `i64` (how Redis reads numeric
/// arguments such as `LRANGE key 0 -1` and the values `INCR` adds to).
///
/// # Examples
///
/// ```
/// use cornflakes_resp::parse::parse_integer;
///
/// assert_eq!(parse_integer(b"-12"), Some(-12));
/// assert_eq!(parse_integer(b"012"), None);
/// ```
pub fn parse_integer(s: &[u8]) -> Option<i64> {
    integer(s)
}

fn integer(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'-', d @ ..] => (true, d),
        d => (false, d),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    if neg && digits == b"0" {
        return None;
    }
    let v: i128 = digits.iter().fold(0i128, |v, d| v * 10 + i128::from(d - b'0'));
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

fn multibulk<'a>(buf: &'a [u8], limits: &Limits) -> Result<Parsed<'a>, ProtocolError> {
    let Some((count_line, mut at)) = line(buf) else {
        return if buf.len() > limits.max_inline_len {
            Err(ProtocolError::TooBigMultibulkCount)
        } else {
            Ok(Parsed::Incomplete(buf.len() + 1))
        };
    };
    let count = integer(&count_line[1..]).ok_or(ProtocolError::InvalidMultibulkLength)?;
    if count > limits.max_args as i64 {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    if count <= 0 {
        return Ok(Parsed::Empty(at));
    }
    let mut args = Args::new();
    for _ in 0..count {
        let rest = &buf[at..];
        if rest.is_empty() {
            return Ok(Parsed::Incomplete(at + 1));
        }
        if rest[0] != b'$' {
            return Err(ProtocolError::ExpectedDollar(rest[0] as char));
        }
        let Some((len_line, used)) = line(rest) else {
            return if rest.len() > limits.max_inline_len {
                Err(ProtocolError::TooBigBulkCount)
            } else {
                Ok(Parsed::Incomplete(buf.len() + 1))
            };
        };
        let len = integer(&len_line[1..]).ok_or(ProtocolError::InvalidBulkLength)?;
        let len = usize::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
        if len > limits.max_bulk_len {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let start = at + used;
        // The value and its `\r\n` (which Redis skips without looking).
        let end = start.checked_add(len).ok_or(ProtocolError::InvalidBulkLength)?;
        let need = end.checked_add(2).ok_or(ProtocolError::InvalidBulkLength)?;
        if need > buf.len() {
            return Ok(Parsed::Incomplete(need));
        }
        args.push(Cow::Borrowed(&buf[start..end]));
        at = end + 2;
    }
    Ok(Parsed::Command(args, at))
}

fn inline<'a>(buf: &'a [u8], limits: &Limits) -> Result<Parsed<'a>, ProtocolError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() > limits.max_inline_len {
            Err(ProtocolError::TooBigInline)
        } else {
            Ok(Parsed::Incomplete(buf.len() + 1))
        };
    };
    if nl > limits.max_inline_len {
        return Err(ProtocolError::TooBigInline);
    }
    let text = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let args = split_args(text)?;
    if args.is_empty() {
        Ok(Parsed::Empty(nl + 1))
    } else {
        Ok(Parsed::Command(args, nl + 1))
    }
}

/// Splits an inline command as Redis's `sdssplitargs` does: words
/// separated by white space; `"..."` with `\n \r \t \b \a \\ \"` and
/// `\xHH` escapes; `'...'` with `\'`; a closing quote must be followed by
/// white space or the end.
fn split_args(text: &[u8]) -> Result<Args<'_>, ProtocolError> {
    let mut args = Args::new();
    let mut p = 0;
    loop {
        while p < text.len() && is_space(text[p]) {
            p += 1;
        }
        if p == text.len() {
            return Ok(args);
        }
        let start = p;
        let mut word: Option<Vec<u8>> = None; // owned once quoting changes bytes
        while let Some(&c) = text.get(p) {
            match c {
                b'"' => {
                    let w = word.get_or_insert_with(|| text[start..p].to_vec());
                    p = double_quoted(text, p + 1, w)?;
                }
                b'\'' => {
                    let w = word.get_or_insert_with(|| text[start..p].to_vec());
                    p = single_quoted(text, p + 1, w)?;
                }
                c if is_space(c) => break,
                c => {
                    if let Some(w) = word.as_mut() {
                        w.push(c);
                    }
                    p += 1;
                }
            }
        }
        args.push(match word {
            Some(w) => Cow::Owned(w),
            None => Cow::Borrowed(&text[start..p]),
        });
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t' | b'\x0b' | b'\x0c' | b'\0')
}

/// A `"`-quoted section from `p` (after the quote); returns where parsing
/// goes on (after the closing quote).
fn double_quoted(text: &[u8], mut p: usize, out: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        let Some(&c) = text.get(p) else { return Err(ProtocolError::UnbalancedQuotes) };
        match c {
            b'\\'
                if text.get(p + 1) == Some(&b'x')
                    && text.get(p + 2).is_some_and(u8::is_ascii_hexdigit)
                    && text.get(p + 3).is_some_and(u8::is_ascii_hexdigit) =>
            {
                let hex = |b: u8| (b as char).to_digit(16).expect("a hex digit") as u8;
                out.push(hex(text[p + 2]) * 16 + hex(text[p + 3]));
                p += 4;
            }
            b'\\' if p + 1 < text.len() => {
                out.push(match text[p + 1] {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'a' => 0x07,
                    other => other,
                });
                p += 2;
            }
            b'"' => {
                if text.get(p + 1).is_some_and(|&n| !is_space(n)) {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                return Ok(p + 1);
            }
            c => {
                out.push(c);
                p += 1;
            }
        }
    }
}

/// A `'`-quoted section; see [`double_quoted`].
fn single_quoted(text: &[u8], mut p: usize, out: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        let Some(&c) = text.get(p) else { return Err(ProtocolError::UnbalancedQuotes) };
        match c {
            b'\\' if text.get(p + 1) == Some(&b'\'') => {
                out.push(b'\'');
                p += 2;
            }
            b'\'' => {
                if text.get(p + 1).is_some_and(|&n| !is_space(n)) {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                return Ok(p + 1);
            }
            c => {
                out.push(c);
                p += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parsed command's arguments (owned) and the bytes it used.
    type Owned = Option<(Vec<Vec<u8>>, usize)>;

    fn one(buf: &[u8]) -> Result<Owned, ProtocolError> {
        parse_command(buf, &Limits::default())
            .map(|o| o.map(|(c, used)| (c.args.iter().map(|a| a.to_vec()).collect(), used)))
    }

    fn words(ws: &[&str]) -> Vec<Vec<u8>> {
        ws.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_commands_borrow_their_arguments_and_say_what_they_used() {
        let buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n";
        let (cmd, used) = parse_command(buf, &Limits::default()).unwrap().unwrap();
        assert!(cmd.is("set"));
        assert!(cmd.args.iter().all(|a| matches!(a, Cow::Borrowed(_))));
        assert_eq!(cmd.args.iter().map(|a| a.to_vec()).collect::<Vec<_>>(), words(&["SET", "k", ""]));
        assert_eq!(&buf[used..], b"*1\r\n$4\r\nPING\r\n");
        // Binary-safe values, CRLF inside included.
        let (args, _) = one(b"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n").unwrap().unwrap();
        assert_eq!(args[1], b"a\r\nb");
    }

    #[test]
    fn every_prefix_of_a_command_is_incomplete() {
        let buf = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
        for end in 0..buf.len() {
            assert_eq!(one(&buf[..end]), Ok(None), "prefix of {end} bytes");
        }
        assert_eq!(one(buf).unwrap().unwrap().1, buf.len());
        let inline = b"SET key value\r\n";
        for end in 0..inline.len() {
            assert_eq!(one(&inline[..end]), Ok(None), "inline prefix of {end} bytes");
        }
    }

    #[test]
    fn an_unfinished_command_never_asks_for_more_than_completes_it() {
        // A server waits for `need` bytes before parsing again: asking for
        // one byte more than the command has would hang it.
        let commands: [&[u8]; 4] = [
            b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
            b"*0\r\n\r\n*2\r\n$4\r\nECHO\r\n$12\r\nhello\r\nworld\r\n",
            b"SET key value\r\n",
            b"*1\r\n$0\r\n\r\n",
        ];
        for buf in commands {
            for end in 0..buf.len() {
                match next_command(&buf[..end], &Limits::default()) {
                    Ok(Next::Incomplete { need }) => {
                        assert!(need > end && need <= buf.len(), "{buf:?} cut at {end}: need {need}")
                    }
                    other => panic!("{buf:?} cut at {end}: {other:?}"),
                }
            }
            assert!(matches!(next_command(buf, &Limits::default()), Ok(Next::Command(_, used)) if used == buf.len()));
        }
        // Inside a large argument, the need is its end.
        let head = b"*2\r\n$3\r\nSET\r\n$1000000\r\n";
        let mut buf = head.to_vec();
        buf.extend([7u8; 4096]);
        assert_eq!(next_command(&buf, &Limits::default()), Ok(Next::Incomplete { need: head.len() + 1_000_002 }));
    }

    #[test]
    fn empty_commands_are_skipped() {
        assert_eq!(one(b"*0\r\n*-1\r\n\r\n  \r\nPING\r\n").unwrap().unwrap().0, words(&["PING"]));
        assert_eq!(one(b"*0\r\n"), Ok(None));
    }

    #[test]
    fn redis_errors_for_malformed_requests() {
        use ProtocolError::*;
        assert_eq!(one(b"*x\r\n"), Err(InvalidMultibulkLength));
        assert_eq!(one(b"*2000000\r\n"), Err(InvalidMultibulkLength));
        assert_eq!(one(b"*+1\r\n"), Err(InvalidMultibulkLength));
        assert_eq!(one(b"*01\r\n"), Err(InvalidMultibulkLength));
        assert_eq!(one(b"*1\r\n:3\r\n"), Err(ExpectedDollar(':')));
        assert_eq!(one(b"*1\r\n$-1\r\n"), Err(InvalidBulkLength));
        assert_eq!(one(b"*1\r\n$99999999999999999999\r\n"), Err(InvalidBulkLength));
        assert_eq!(one(b"*1\r\n$536870913\r\n"), Err(InvalidBulkLength));
        assert_eq!(one(&[b'*'; 70_000]), Err(TooBigMultibulkCount));
        let mut long_len = b"*1\r\n$".to_vec();
        long_len.extend([b'1'; 70_000]);
        assert_eq!(one(&long_len), Err(TooBigBulkCount));
        assert_eq!(one(&[b'a'; 70_000]), Err(TooBigInline));
        assert_eq!(one(b"SET \"a b\r\n"), Err(UnbalancedQuotes));
        assert_eq!(one(b"SET \"a\"b\r\n"), Err(UnbalancedQuotes), "a closing quote must end the word");
        assert_eq!(one(b"SET 'a\r\n"), Err(UnbalancedQuotes));
        assert_eq!(InvalidBulkLength.to_string(), "Protocol error: invalid bulk length");
    }

    #[test]
    fn a_huge_announced_bulk_allocates_nothing_and_waits_within_the_query_limit() {
        let limits = Limits { max_query_buffer: 100, ..Limits::default() };
        let buf = b"*2\r\n$3\r\nSET\r\n$500000000\r\nabc";
        assert_eq!(parse_command(buf, &limits), Ok(None));
        let mut big = buf.to_vec();
        big.extend([0u8; 100]);
        assert_eq!(parse_command(&big, &limits), Err(ProtocolError::QueryBufferFull(big.len())));
    }

    #[test]
    fn inline_commands_follow_redis_quoting() {
        assert_eq!(one(b"  get   key \n").unwrap().unwrap().0, words(&["get", "key"]));
        assert_eq!(
            one(b"set \"a b\\n\\x41\\\"\" 'it\\'s' x\"y z\"\r\n").unwrap().unwrap().0,
            vec![b"set".to_vec(), b"a b\nA\"".to_vec(), b"it's".to_vec(), b"xy z".to_vec()]
        );
        // Unknown escapes keep the character; a bad hex escape is literal.
        assert_eq!(one(b"echo \"\\q\\xZZ\"\n").unwrap().unwrap().0, vec![b"echo".to_vec(), b"qxZZ".to_vec()]);
        assert_eq!(one(b"echo \"\"\n").unwrap().unwrap().0, vec![b"echo".to_vec(), Vec::new()]);
    }

    #[test]
    fn integers_are_parsed_as_redis_does() {
        for (s, v) in [("0", Some(0)), ("12", Some(12)), ("-3", Some(-3)), ("9223372036854775807", Some(i64::MAX))] {
            assert_eq!(integer(s.as_bytes()), v, "{s}");
        }
        for s in ["", "-", "+1", "01", "-0", " 1", "1 ", "9223372036854775808", "1e3"] {
            assert_eq!(integer(s.as_bytes()), None, "{s}");
        }
    }

    proptest::proptest! {
        /// Any bytes: an answer, never a panic, and a command's reported
        /// length never exceeds the input.
        #[test]
        fn arbitrary_input_never_panics(buf in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            if let Ok(Some((cmd, used))) = parse_command(&buf, &Limits::default()) {
                proptest::prop_assert!(used <= buf.len());
                proptest::prop_assert!(!cmd.args.is_empty());
            }
        }

        /// Any list of arguments, encoded as multibulk, parses back to
        /// itself, also when split at any point.
        #[test]
        fn multibulk_round_trips(args in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 1..8), cut in 0usize..400) {
            let mut buf = format!("*{}\r\n", args.len()).into_bytes();
            for a in &args {
                buf.extend(format!("${}\r\n", a.len()).bytes());
                buf.extend(a);
                buf.extend(b"\r\n");
            }
            let (got, used) = one(&buf).unwrap().unwrap();
            proptest::prop_assert_eq!(&got, &args);
            proptest::prop_assert_eq!(used, buf.len());
            let cut = cut.min(buf.len() - 1);
            proptest::prop_assert_eq!(one(&buf[..cut]), Ok(None));
        }
    }
}
