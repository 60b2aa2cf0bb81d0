use cornflakes::Pool;
use cornflakes_resp::{parse_command, Limits, Part};

use super::*;

fn db() -> RespDb {
    RespDb::new(Store::new(Pool::new().expect("pool"), resp_limits()), 512)
}

/// Runs every command of `input`; the replies as bytes, and the reply.
fn run(db: &mut RespDb, input: &[u8]) -> (Vec<u8>, Reply<RcBuf>) {
    let mut reply = Reply::new(db.threshold());
    let mut session = Session::default();
    let mut at = 0;
    while let Some((cmd, used)) = parse_command(&input[at..], &Limits::default()).unwrap() {
        db.execute(&cmd, &mut session, &mut reply);
        at += used;
    }
    (reply.to_vec(), reply)
}

fn answer(db: &mut RespDb, input: &str) -> String {
    String::from_utf8(run(db, input.as_bytes()).0).unwrap()
}

#[test]
fn large_values_are_referenced_from_the_store_and_small_ones_copied() {
    let mut d = db();
    let big = "x".repeat(512);
    answer(&mut d, &format!("SET big {big}\r\nSET small {}\r\nRPUSH l {big} s {big}\r\n", &big[..511]));
    let (wire, reply) = run(&mut d, b"GET big\r\nGET small\r\nLRANGE l 0 -1\r\nMGET big small\r\n");
    let stored = d.store().get(b"big").unwrap().single().unwrap().clone();
    let values: Vec<&RcBuf> = reply
        .parts()
        .iter()
        .filter_map(|p| match p {
            Part::Value(v) => Some(v),
            Part::Copied(_) => None,
        })
        .collect();
    assert_eq!(values.len(), 4, "GET big, two list elements, MGET big");
    assert_eq!(values[0].as_ptr(), stored.as_ptr(), "the store's own buffer, not a copy");
    let mut want =
        format!("$512\r\n{big}\r\n$511\r\n{}\r\n*3\r\n$512\r\n{big}\r\n$1\r\ns\r\n$512\r\n{big}\r\n", &big[..511]);
    want.push_str(&format!("*2\r\n$512\r\n{big}\r\n$511\r\n{}\r\n", &big[..511]));
    assert_eq!(String::from_utf8(wire).unwrap(), want);
}

#[test]
#[cfg_attr(miri, ignore)] // wall-clock expiry: Miri runs too slowly for a 300 ms TTL
fn expired_keys_are_gone_when_touched() {
    let mut d = db();
    assert_eq!(answer(&mut d, "SET k v PX 300\r\nGET k\r\nEXISTS k\r\n"), "+OK\r\n$1\r\nv\r\n:1\r\n");
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(answer(&mut d, "GET k\r\nTTL k\r\nDBSIZE\r\n"), "$-1\r\n:-2\r\n:0\r\n");
    // SET without KEEPTTL clears the time to live; with it, keeps it.
    assert_eq!(answer(&mut d, "SET k v EX 100\r\nSET k w\r\nTTL k\r\n"), "+OK\r\n+OK\r\n:-1\r\n");
    assert_eq!(answer(&mut d, "SET k v EX 100\r\nSET k w KEEPTTL\r\nTTL k\r\n"), "+OK\r\n+OK\r\n:100\r\n");
}

#[test]
fn types_arity_and_limits_answer_with_redis_errors() {
    let mut d = db();
    assert_eq!(
        answer(&mut d, "RPUSH l a\r\nGET l\r\nSET s 1\r\nLPUSH s x\r\nLLEN s\r\n"),
        ":1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(answer(&mut d, "GET\r\n"), "-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(
        answer(&mut d, "averyveryverylongcommandname x\r\n"),
        "-ERR unknown command 'averyveryverylongcommandname', with args beginning with: 'x' \r\n"
    );
    let huge = vec![b'x'; (1 << 20) + 1];
    let mut set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n".to_vec();
    set.extend(format!("${}\r\n", huge.len()).bytes());
    set.extend(&huge);
    set.extend(b"\r\n");
    let (wire, _) = run(&mut d, &set);
    assert!(wire.starts_with(b"-ERR string exceeds maximum allowed size"), "{}", String::from_utf8_lossy(&wire));
    assert_eq!(answer(&mut d, "SET \"\" v\r\n"), "-ERR empty keys are not supported by this server\r\n");
    assert_eq!(answer(&mut d, "SELECT 1\r\n"), "-ERR DB index is out of range\r\n");
    assert_eq!(answer(&mut d, "HELLO 3\r\n"), "-NOPROTO unsupported protocol version\r\n");
    assert!(answer(&mut d, "HELLO 2\r\n").starts_with("*14\r\n$6\r\nserver\r\n"));
    assert_eq!(answer(&mut d, "COMMAND COUNT\r\n"), format!(":{}\r\n", COMMANDS.len()));
}

#[test]
fn glob_patterns_match_as_redis_does() {
    assert!(glob_match(b"*", b"save"));
    assert!(glob_match(b"app*", b"appendonly"));
    assert!(glob_match(b"s?ve", b"save"));
    assert!(!glob_match(b"save", b"saves"));
    assert!(!glob_match(b"x*", b"save"));
}

#[test]
#[cfg_attr(miri, ignore)] // reads the wall clock
fn expire_times_past_what_an_i64_of_unix_milliseconds_holds_are_invalid() {
    let mut d = db();
    let invalid = "-ERR invalid expire time in 'set' command\r\n";
    // Accepted before, after which TTL answered -9223372036854775.
    assert_eq!(answer(&mut d, "SET t v PX 9223372036854775807\r\n"), invalid);
    assert_eq!(answer(&mut d, "SET t v EX 9223372036854775\r\n"), invalid);
    assert_eq!(answer(&mut d, "EXISTS t\r\n"), ":0\r\n");
    // A far but representable deadline is kept, and TTL reports it.
    assert_eq!(answer(&mut d, "SET t v EX 100000000000\r\nTTL t\r\n"), "+OK\r\n:100000000000\r\n");
}

#[test]
fn http_requests_are_closed_without_a_reply_as_redis_does() {
    let mut d = db();
    for line in ["POST / HTTP/1.1", "Host: example.com"] {
        let input = format!("{line}\r\n");
        let (cmd, _) = parse_command(input.as_bytes(), &Limits::default()).unwrap().unwrap();
        let mut reply = Reply::new(d.threshold());
        assert!(d.execute(&cmd, &mut Session::default(), &mut reply) == After::Close, "{line}");
        assert!(reply.is_empty(), "{line}");
    }
    assert_eq!(answer(&mut d, "GET / HTTP/1.1\r\n"), "-ERR wrong number of arguments for 'get' command\r\n");
}
