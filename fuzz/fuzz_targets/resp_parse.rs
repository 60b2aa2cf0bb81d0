//! Arbitrary bytes as a client's request stream into the RESP server's
//! parser (`cornflakes_resp::parse::parse_command`, what `cf kv-server
//! --protocol resp` runs on every read), with small arbitrary limits so that
//! each limit's check is reached.
//!
//! Input: four bytes of limits (longest bulk argument, most arguments,
//! longest inline line, most bytes held for an incomplete command; each
//! scaled from one byte), then the stream.
//!
//! Oracle, for the first command the stream holds:
//! - it has at least one argument and used no more bytes than the stream
//!   has;
//! - the parser did not look past it: the stream cut right after it parses
//!   to the same command and length;
//! - it did not end sooner: the stream cut one byte short of it (and half
//!   way) is not a command yet;
//! - its arguments, written back as a multibulk command (by the reply
//!   writer, `Reply::array` and `Reply::bulk`), parse to
//!   themselves with roomy limits, and with the input's limits exactly when
//!   there are at most `max_args` of them and none is longer than
//!   `max_bulk_len`.
#![no_main]

use cornflakes_resp::parse::{parse_command, Limits};
use cornflakes_resp::Reply;
use libfuzzer_sys::fuzz_target;

/// `args` as a multibulk request: a RESP array of bulk strings, which is
/// what the server's reply writer writes for an array of copied values.
fn multibulk(args: &[&[u8]]) -> Vec<u8> {
    let mut out: Reply<&[u8]> = Reply::new(usize::MAX);
    out.array(args.len());
    for a in args {
        out.bulk(a);
    }
    out.to_vec()
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let limits = Limits {
        max_bulk_len: usize::from(data[0]) * 16,
        max_args: usize::from(data[1]),
        max_inline_len: usize::from(data[2]) * 8,
        max_query_buffer: usize::from(data[3]) * 64,
    };
    let stream = &data[4..];
    let Ok(Some((cmd, used))) = parse_command(stream, &limits) else {
        return;
    };
    assert!(used <= stream.len(), "used {used} of {} bytes", stream.len());
    assert!(!cmd.args.is_empty(), "a command without a name");

    let exact = parse_command(&stream[..used], &limits);
    assert_eq!(exact, Ok(Some((cmd.clone(), used))), "the parse looked past its command");
    for cut in [used - 1, used / 2] {
        assert!(
            !matches!(parse_command(&stream[..cut], &limits), Ok(Some(_))),
            "a command ended at {cut}, before {used}"
        );
    }

    let args: Vec<&[u8]> = cmd.args.iter().map(|a| &a[..]).collect();
    let again = multibulk(&args);
    let owned =
        |c: &cornflakes_resp::parse::Command<'_>| -> Vec<Vec<u8>> { c.args.iter().map(|a| a.to_vec()).collect() };
    let expected = (owned(&cmd), again.len());
    let back = parse_command(&again, &Limits::default()).expect("our own multibulk parses").expect("complete");
    assert_eq!((owned(&back.0), back.1), expected, "written back, the arguments changed");
    let within = args.len() <= limits.max_args && args.iter().all(|a| a.len() <= limits.max_bulk_len);
    match parse_command(&again, &limits) {
        Ok(Some((c, used))) => assert!(within && (owned(&c), used) == expected, "accepted over the limits, or changed"),
        Ok(None) => panic!("a whole multibulk command read as incomplete"),
        Err(e) => assert!(!within, "refused within the limits: {e}"),
    };
});
