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
    assert_eq!(answer(&mut d, "SELECT 16\r\n"), "-ERR DB index is out of range\r\n");
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
    assert!(glob_match(b"user:[12]", b"user:2"));
    assert!(!glob_match(b"user:[12]", b"user:3"));
    assert!(glob_match(b"user:[^1]", b"user:3"));
    assert!(!glob_match(b"user:[^1]", b"user:1"));
    assert!(glob_match(b"[a-c]x", b"bx"));
    assert!(glob_match(b"[c-a]x", b"bx"), "a reversed range, as Redis takes it");
    assert!(glob_match(b"\\*x", b"*x"));
    assert!(!glob_match(b"\\*x", b"ax"));
    assert!(glob_match(b"[\\]]", b"]"));
    assert!(glob_match(b"*a*b*c", b"xxaxxbxxc"));
    assert!(!glob_match(b"*a*b*c", b"xxaxxbxx"));
    assert!(glob_match(b"a[b", b"ab"), "an unclosed class ends with the pattern");
    assert!(glob_match(b"**", b""));
}

#[test]
#[cfg_attr(miri, ignore)] // millions of steps: minutes under Miri, and nothing unsafe to check
fn a_pattern_with_many_stars_takes_linear_time_not_exponential() {
    // Exponential backtracking would take longer than the age of the universe here.
    let text = vec![b'a'; 100_000];
    let pattern = [&b"*a"[..]; 40].concat().into_iter().chain(*b"*b").collect::<Vec<u8>>();
    assert!(!glob_match(&pattern, &text));
}

#[test]
fn maxmemory_refuses_what_may_add_data_once_keys_and_values_exceed_it() {
    let mut d = db();
    let oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    assert_eq!(answer(&mut d, "CONFIG SET maxmemory 1kb\r\n"), "+OK\r\n");
    assert_eq!(d.maxmemory(), 1024);
    let big = "x".repeat(1500);
    // Redis checks before a command, so the one that crosses the limit runs.
    assert_eq!(answer(&mut d, &format!("SET a {big}\r\n")), "+OK\r\n");
    assert_eq!(d.store().data_bytes(), 1501);
    for cmd in ["SET b x", "APPEND a y", "INCR n", "RPUSH l x", "LPUSH l x", "MSET c d", "INCRBY n 2"] {
        assert_eq!(answer(&mut d, &format!("{cmd}\r\n")), oom, "{cmd}");
    }
    // Reads and deletions go on.
    assert_eq!(answer(&mut d, "STRLEN a\r\n"), ":1500\r\n");
    assert_eq!(answer(&mut d, "EXPIRE a 100\r\n"), ":1\r\n");
    assert!(answer(&mut d, "INFO memory\r\n").contains("used_memory:1501\r\nused_memory_human:1.47K\r\n"));
    assert_eq!(answer(&mut d, "DEL a\r\n"), ":1\r\n");
    assert_eq!(answer(&mut d, "SET b x\r\n"), "+OK\r\n");
    assert_eq!(
        answer(&mut d, "CONFIG SET maxmemory 1.5gb\r\n"),
        "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\r\n"
    );
    assert_eq!(answer(&mut d, "CONFIG SET maxmemory 0\r\n"), "+OK\r\n");
    assert_eq!(answer(&mut d, &format!("SET a {big}\r\nSET c d\r\n")), "+OK\r\n+OK\r\n");
}

#[test]
fn info_reports_clients_memory_and_commands() {
    let mut d = db();
    d.set_max_clients(77);
    d.counters.connected_clients = 3;
    d.counters.total_connections = 9;
    answer(&mut d, "SET k vvvv\r\nRPUSH l a b\r\n");
    let info = answer(&mut d, "INFO\r\n");
    for line in [
        "connected_clients:3\r\n",
        "maxclients:77\r\n",
        "used_memory:8\r\n",
        "maxmemory_policy:noeviction\r\n",
        "total_connections_received:9\r\n",
        "total_commands_processed:3\r\n",
        "keyspace_hits:0\r\nkeyspace_misses:0\r\n",
        "# Replication\r\nrole:master\r\n",
        "db0:keys=2,expires=0,avg_ttl=0\r\n",
    ] {
        assert!(info.contains(line), "{line:?} not in {info}");
    }
    let clients = answer(&mut d, "INFO clients\r\n");
    assert!(clients.contains("# Clients") && !clients.contains("# Memory"), "{clients}");
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

/// Keys nobody reads after their time is up are reclaimed by the active
/// expiry (before, they stayed, counted in DBSIZE and against maxmemory,
/// until something touched them: found by an operator review).
#[test]
#[cfg_attr(miri, ignore)] // reads the clock
fn keys_whose_time_is_up_are_reclaimed_without_being_read() {
    let mut d = db();
    answer(&mut d, "SET a 1 PX 1\r\nSET b 2 PX 1\r\nRPUSH l x y\r\nPEXPIRE l 1\r\nSET c 3 PX 100000\r\nSET k v\r\n");
    assert_eq!(answer(&mut d, "DBSIZE\r\n"), ":5\r\n");
    let later = Instant::now() + Duration::from_millis(50);
    assert_eq!(d.expire_due(later, 2), 2, "at most as many as asked");
    assert_eq!(d.expire_due(later, 100), 1);
    assert_eq!(d.expire_due(later, 100), 0, "c is not due, k has no expiry");
    assert_eq!(answer(&mut d, "DBSIZE\r\n"), ":2\r\n");
    assert_eq!(d.store().data_bytes(), 4, "c, 3, k, v");
    assert!(answer(&mut d, "INFO\r\n").contains("expired_keys:3\r\n"));
    assert!(answer(&mut d, "INFO keyspace\r\n").contains("db0:keys=2,expires=1,"));
    // A key set again without a TTL, or persisted, is not expired later.
    answer(&mut d, "SET p 1 PX 1\r\nSET p 2\r\nSET q 1 PX 1\r\nPERSIST q\r\n");
    assert_eq!(d.expire_due(Instant::now() + Duration::from_millis(50), 100), 0);
    assert_eq!(answer(&mut d, "MGET p q\r\n"), "*2\r\n$1\r\n2\r\n$1\r\n1\r\n");
}

/// MSET writes every pair or none: a key past the limit refuses the whole
/// command (before, the pairs before it were written: an operator review).
#[test]
fn mset_with_a_pair_past_the_limits_writes_nothing() {
    let mut d = db();
    let long_key = "k".repeat(70_000);
    let args = ["MSET", "m1", "1", &long_key, "v", "m2", "2"];
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    let got = answer(&mut d, &cmd);
    assert!(got.starts_with("-ERR string exceeds maximum allowed size"), "{got}");
    assert_eq!(answer(&mut d, "EXISTS m1 m2\r\n"), ":0\r\n");
    assert_eq!(answer(&mut d, "MSET m1 1 m2 2\r\nMGET m1 m2\r\n"), "+OK\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
}

/// SCAN returns every key present for the whole iteration at least once,
/// while keys are added and removed under it, about COUNT keys a call (a
/// full iteration is O(keys / COUNT) calls, each O(COUNT)); MATCH and TYPE
/// filter.
#[test]
fn scan_returns_every_key_that_stays() {
    let mut d = db();
    let n = if cfg!(miri) { 40 } else { 2000 };
    for i in 0..n {
        answer(&mut d, &format!("SET k{i} v\r\n"));
    }
    answer(&mut d, "RPUSH l a b\r\nSET other x\r\nHSET h f v\r\n");
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut cursor = "0".to_owned();
    let (mut calls, mut most) = (0, 0);
    loop {
        let got = answer(&mut d, &format!("SCAN {cursor} COUNT 7\r\n"));
        let lines: Vec<&str> = got.split("\r\n").collect();
        // *2, $len, cursor, *n, then $len key pairs.
        cursor = lines[2].to_owned();
        let keys: Vec<&str> = lines[4..].iter().skip(1).step_by(2).copied().collect();
        most = most.max(keys.len());
        for key in keys {
            *seen.entry(key.to_owned()).or_default() += 1;
        }
        calls += 1;
        // Churn: keys that come and go during the iteration, and a hash
        // that becomes a string (it moves between the store's tables).
        answer(&mut d, &format!("SET new{calls} v\r\nDEL k{}\r\n", calls % 5));
        if calls == 3 {
            answer(&mut d, "SET h now-a-string\r\n");
        }
        if cursor == "0" {
            break;
        }
        assert!(calls < 10 * n, "the iteration ends");
    }
    for i in 5..n {
        assert!(seen.contains_key(&format!("k{i}")), "k{i}");
    }
    assert!(["l", "other", "h"].iter().all(|k| seen.contains_key(*k)), "{:?}", seen.get("h"));
    // The store did not grow past a doubling here: no key came twice.
    assert!(seen.values().all(|&c| c == 1), "no key twice");
    // About COUNT keys a call (the last class visited may hold a few more).
    assert!(calls >= n / 7 / 2 && most <= 7 + 15, "{calls} calls, {most} keys at most");

    let only =
        |cmd: &str, d: &mut RespDb| answer(d, cmd).split("\r\n").skip(5).step_by(2).filter(|s| !s.is_empty()).count();
    assert_eq!(only("SCAN 0 MATCH k1? COUNT 100000\r\n", &mut d), 10);
    assert_eq!(only("SCAN 0 TYPE list COUNT 100000\r\n", &mut d), 1);
    assert_eq!(answer(&mut d, "SCAN x\r\n"), "-ERR invalid cursor\r\n");
    assert_eq!(answer(&mut d, "SCAN 0 COUNT 0\r\n"), "-ERR syntax error\r\n");
    assert_eq!(answer(&mut d, "SCAN 0 BOGUS\r\n"), "-ERR syntax error\r\n");
}

#[test]
fn info_counts_hits_and_misses_of_reads() {
    let mut d = db();
    answer(&mut d, "SET a 1\r\nGET a\r\nGET b\r\nMGET a b c\r\nGETEX a\r\nGETEX nope\r\n");
    let info = answer(&mut d, "INFO stats\r\n");
    assert!(info.contains("keyspace_hits:3\r\nkeyspace_misses:4\r\n"), "{info}");
    let memory = answer(&mut d, "INFO memory\r\n");
    let rss: usize =
        memory.split("used_memory_rss:").nth(1).and_then(|r| r.split("\r\n").next()).unwrap().parse().unwrap();
    assert!(cfg!(miri) || rss > 1 << 20, "{memory}");
}

#[test]
fn hash_values_past_the_threshold_are_referenced_and_hset_past_the_limits_sets_nothing() {
    let mut d = db();
    let big = "x".repeat(600);
    assert_eq!(answer(&mut d, &format!("HSET h big {big} small s\r\n")), ":2\r\n");
    let stored = d.store().hash(b"h").unwrap().get(b"big").unwrap().clone();
    let (wire, reply) = run(&mut d, b"HGET h big\r\nHGETALL h\r\n");
    let values: Vec<&RcBuf> = reply
        .parts()
        .iter()
        .filter_map(|p| match p {
            Part::Value(v) => Some(v),
            Part::Copied(_) => None,
        })
        .collect();
    assert_eq!(values.len(), 2, "HGET big and HGETALL's big");
    assert!(values.iter().all(|v| v.as_ptr() == stored.as_ptr()), "the store's own buffer, not a copy");
    assert_eq!(
        String::from_utf8(wire).unwrap(),
        format!("$600\r\n{big}\r\n*4\r\n$3\r\nbig\r\n$600\r\n{big}\r\n$5\r\nsmall\r\n$1\r\ns\r\n")
    );
    // A value past 1 MiB among the pairs: none of them is set.
    let huge = "y".repeat((1 << 20) + 1);
    let hset =
        format!("*6\r\n$4\r\nHSET\r\n$1\r\nh\r\n$3\r\nnew\r\n$1\r\n1\r\n$4\r\nhuge\r\n${}\r\n{huge}\r\n", huge.len());
    let refused = answer(&mut d, &format!("{hset}HEXISTS h new\r\n"));
    assert!(
        refused.starts_with("-ERR string exceeds maximum allowed size") && refused.ends_with(":0\r\n"),
        "{refused}"
    );
    // maxmemory holds for hashes: fields and values count.
    let used = d.store().data_bytes();
    assert_eq!(used, 1 + 3 + 600 + 5 + 1);
    d.set_maxmemory(used);
    assert_eq!(
        answer(&mut d, "HSET h more 1\r\nHSET h again 2\r\nHDEL h big\r\nHLEN h\r\n"),
        ":1\r\n-OOM command not allowed when used memory > 'maxmemory'.\r\n:1\r\n:2\r\n"
    );
}

#[test]
#[cfg_attr(miri, ignore)] // random picks over many commands: slow under Miri, and nothing unsafe in it
fn spop_and_srandmember_pick_members_distinct_unless_the_count_is_negative() {
    let mut d = db();
    answer(&mut d, "SADD s a b c d e f g h\r\n");
    let members = |reply: &str| -> Vec<String> {
        reply.split("\r\n").filter(|l| !l.is_empty() && !l.starts_with(['*', '$'])).map(str::to_owned).collect()
    };
    let picked = members(&answer(&mut d, "SRANDMEMBER s 5\r\n"));
    let distinct: std::collections::BTreeSet<&String> = picked.iter().collect();
    assert_eq!((picked.len(), distinct.len()), (5, 5), "{picked:?}");
    assert_eq!(answer(&mut d, "SCARD s\r\n"), ":8\r\n", "SRANDMEMBER removes nothing");
    assert_eq!(members(&answer(&mut d, "SRANDMEMBER s -20\r\n")).len(), 20, "picks may repeat");
    let popped = members(&answer(&mut d, "SPOP s 3\r\n"));
    assert_eq!(popped.len(), 3);
    for m in &popped {
        assert_eq!(answer(&mut d, &format!("SISMEMBER s {m}\r\n")), ":0\r\n", "{m} was removed");
    }
    let rest = members(&answer(&mut d, "SPOP s 100\r\n"));
    let all: std::collections::BTreeSet<String> = popped.into_iter().chain(rest).collect();
    assert_eq!(all.len(), 8, "every member once: {all:?}");
    assert_eq!(answer(&mut d, "EXISTS s\r\n"), ":0\r\n");
    // A reply of unbounded size is refused.
    answer(&mut d, "SADD s a\r\n");
    assert_eq!(answer(&mut d, "SRANDMEMBER s -100000000000\r\n"), "-ERR value is out of range\r\n");
}

/// A database whose keys and values may take `keys` values of 100 bytes
/// under `policy`, with those keys written (`k0` ...).
fn full_db(policy: &str, keys: usize) -> RespDb {
    let mut d = db();
    let value = "v".repeat(100);
    for i in 0..keys {
        answer(&mut d, &format!("SET k{i} {value}\r\n"));
    }
    let bytes = d.store().data_bytes();
    assert_eq!(answer(&mut d, &format!("CONFIG SET maxmemory {bytes} maxmemory-policy {policy}\r\n")), "+OK\r\n");
    d
}

fn exists(d: &mut RespDb, key: &str) -> bool {
    answer(d, &format!("EXISTS {key}\r\n")) == ":1\r\n"
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of commands: minutes under Miri, and nothing unsafe in them
fn allkeys_lru_evicts_what_was_not_read_and_never_refuses_a_write() {
    fastrand::seed(7);
    let mut d = full_db("allkeys-lru", 1000);
    let value = "w".repeat(100);
    for round in 0..20 {
        // The hot keys are read between every batch of new ones.
        for i in 0..100 {
            answer(&mut d, &format!("GET k{i}\r\n"));
        }
        for i in 0..50 {
            let r = answer(&mut d, &format!("SET new{round}:{i} {value}\r\n"));
            assert_eq!(r, "+OK\r\n", "a write is never refused under allkeys-lru");
        }
    }
    answer(&mut d, "PING\r\n");
    assert!(d.store().data_bytes() <= d.maxmemory(), "back within maxmemory");
    let hot = (0..100).filter(|i| exists(&mut d, &format!("k{i}"))).count();
    let cold = (100..1000).filter(|i| exists(&mut d, &format!("k{i}"))).count();
    assert!(hot >= 95, "{hot} of 100 recently read keys kept");
    assert!(cold < 200, "{cold} of 900 unread keys kept");
    let info = answer(&mut d, "INFO\r\n");
    assert!(info.contains("maxmemory_policy:allkeys-lru") && !info.contains("evicted_keys:0\r\n"), "{info}");
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of commands, and LFU counters decay by the minute: too slow a clock under Miri
fn allkeys_lfu_keeps_the_keys_read_often() {
    fastrand::seed(11);
    let mut d = full_db("allkeys-lfu", 200);
    for _ in 0..30 {
        for i in 0..20 {
            answer(&mut d, &format!("GET k{i}\r\n"));
        }
    }
    let value = "w".repeat(100);
    for i in 0..400 {
        assert_eq!(answer(&mut d, &format!("SET new{i} {value}\r\n")), "+OK\r\n");
    }
    answer(&mut d, "PING\r\n");
    let hot = (0..20).filter(|i| exists(&mut d, &format!("k{i}"))).count();
    assert!(hot >= 18, "{hot} of 20 frequently read keys kept");
}

#[test]
fn volatile_policies_evict_only_keys_that_expire_and_then_refuse() {
    let mut d = full_db("volatile-ttl", 3);
    answer(&mut d, "EXPIRE k0 1000\r\nEXPIRE k1 10\r\n");
    let value = "w".repeat(100);
    assert_eq!(answer(&mut d, &format!("SET ka {value}\r\nPING\r\n")), "+OK\r\n+PONG\r\n");
    assert!(!exists(&mut d, "k1") && exists(&mut d, "k0"), "the soonest to expire goes first");
    assert_eq!(answer(&mut d, &format!("SET kb {value}\r\nPING\r\n")), "+OK\r\n+PONG\r\n");
    assert!(!exists(&mut d, "k0") && exists(&mut d, "k2"), "a key without an expiry stays");
    // At the limit now, and over it after one more write.
    assert_eq!(answer(&mut d, &format!("SET kc {value}\r\n")), "+OK\r\n");
    // Nothing left that expires: as noeviction.
    for policy in ["volatile-ttl", "volatile-lru", "volatile-lfu", "volatile-random"] {
        answer(&mut d, &format!("CONFIG SET maxmemory-policy {policy}\r\n"));
        assert!(answer(&mut d, &format!("SET kd {value}\r\n")).starts_with("-OOM"), "{policy}");
    }
    assert_eq!(
        answer(&mut d, "CONFIG GET maxmemory-policy\r\n"),
        "*2\r\n$16\r\nmaxmemory-policy\r\n$15\r\nvolatile-random\r\n"
    );
    // allkeys-random gets out of it.
    answer(&mut d, "CONFIG SET maxmemory-policy allkeys-random\r\n");
    assert_eq!(answer(&mut d, &format!("SET kd {value}\r\n")), "+OK\r\n");
    assert!(answer(&mut d, "CONFIG SET maxmemory-policy lru\r\n").starts_with("-ERR CONFIG SET failed"));
    assert!(answer(&mut d, "CONFIG SET maxmemory-samples 0\r\n").contains("between 1 and 2147483647"));
    assert!(answer(&mut d, "CONFIG SET maxmemory-policy noeviction MAXMEMORY-POLICY allkeys-lru\r\n")
        .ends_with("- duplicate parameter\r\n"));
}

#[test]
fn every_database_expires_and_evicts_and_counts_toward_maxmemory() {
    let mut d = db();
    answer(&mut d, "SELECT 3\r\nSET a 1 PX 1\r\nSET b 2\r\nSELECT 7\r\nSET c 3 PX 1\r\n");
    let later = Instant::now() + Duration::from_millis(50);
    assert_eq!(d.expire_due(later, 100), 2, "keys of databases other than the current one expire too");
    let info = answer(&mut d, "INFO keyspace\r\n");
    assert!(info.contains("db3:keys=1,expires=0") && !info.contains("db7:"), "{info}");
    // maxmemory counts every database; a write in database 0 evicts the
    // least recently used keys, which are in database 3.
    let value = "v".repeat(100);
    answer(&mut d, &format!("SELECT 3\r\nSET big {value}\r\n"));
    let used = 1 + 1 + 3 + 100;
    let config = format!("CONFIG SET maxmemory {used} maxmemory-policy allkeys-lru maxmemory-samples 64\r\n");
    assert_eq!(answer(&mut d, &config), "+OK\r\n");
    assert_eq!(answer(&mut d, &format!("SET new {value}\r\nPING\r\n")), "+OK\r\n+PONG\r\n");
    assert!(d.used_bytes() <= used, "{} over {used}", d.used_bytes());
    // (b and big were indexed in the map's order: either goes first, and
    // big goes either way.)
    assert_eq!(answer(&mut d, "SELECT 3\r\nEXISTS big\r\n"), "+OK\r\n:0\r\n", "evicted from database 3");
    assert_eq!(answer(&mut d, "EXISTS new\r\n"), ":1\r\n", "the newest key stays");
    // The random policies draw across databases too: writes never fail.
    answer(&mut d, "CONFIG SET maxmemory-policy allkeys-random\r\n");
    for i in 0..50 {
        assert_eq!(answer(&mut d, &format!("SELECT {}\r\nSET k{i} {value}\r\n", i % 16)), "+OK\r\n+OK\r\n");
    }
    answer(&mut d, "PING\r\n");
    assert!(d.used_bytes() <= used);
}

/// An operator review: a write that needs more than one command's bound
/// of evictions (a large value into a cache of small keys) ran into OOM
/// under allkeys-lru, and EXEC evicted between its own commands.
#[test]
#[cfg_attr(miri, ignore)] // ten thousand keys: minutes under Miri, and nothing unsafe in them
fn allkeys_policies_never_refuse_a_write_and_exec_is_checked_once() {
    let mut d = db();
    for i in 0..10_000 {
        answer(&mut d, &format!("SET k{i} v\r\n"));
    }
    let full = d.store().data_bytes();
    answer(&mut d, &format!("CONFIG SET maxmemory {full} maxmemory-policy allkeys-lru\r\n"));
    // Needs about 20 000 bytes of small keys gone: over 4096 evictions.
    let big = "b".repeat(20_000);
    assert_eq!(answer(&mut d, &format!("SET big {big}\r\n")), "+OK\r\n");
    assert_eq!(answer(&mut d, &format!("SET big2 {big}\r\n")), "+OK\r\n", "eviction still running: the write runs");
    for _ in 0..10 {
        answer(&mut d, "PING\r\n");
    }
    assert!(d.store().data_bytes() <= full, "back within maxmemory after a few commands");
    // Inside EXEC nothing is evicted: a transaction reads its own write
    // (room for one value: the second would evict the first before GET).
    let mut d = db();
    let room = "fresh".len() + big.len();
    answer(&mut d, &format!("CONFIG SET maxmemory {room} maxmemory-policy allkeys-lru\r\n"));
    let mut session = Session::default();
    let mut reply = Reply::new(d.threshold());
    let run_in = |d: &mut RespDb, session: &mut Session, reply: &mut Reply<RcBuf>, input: &str| {
        reply.clear();
        let input = input.as_bytes();
        let mut at = 0;
        while let Some((cmd, used)) = parse_command(&input[at..], &Limits::default()).unwrap() {
            d.execute(&cmd, session, reply);
            at += used;
        }
        String::from_utf8(reply.to_vec()).unwrap()
    };
    let script = format!("MULTI\r\nSET fresh {big}\r\nSET fresh2 {big}\r\nGET fresh\r\nEXEC\r\n");
    let out = run_in(&mut d, &mut session, &mut reply, &script);
    assert!(out.ends_with(&format!("*3\r\n+OK\r\n+OK\r\n$20000\r\n{big}\r\n")), "{}", &out[..out.len().min(200)]);
}

#[test]
fn watching_a_key_again_holds_nothing_more() {
    let mut d = db();
    let mut session = Session::default();
    let mut reply = Reply::new(d.threshold());
    for _ in 0..1000 {
        let (cmd, _) = parse_command(b"WATCH k\r\n", &Limits::default()).unwrap().unwrap();
        d.execute(&cmd, &mut session, &mut reply);
    }
    assert_eq!(d.watchers.len(), 1, "one connection, one key: one flag");
}

/// The review's LFU case: with many warm keys (a third of the cache, each
/// read 20 times), sampling five keys per eviction alone evicted 30 % of
/// them while unread ones stayed; the pool of the best candidates drawn
/// so far keeps them.
#[test]
#[cfg_attr(miri, ignore)] // thousands of commands, and LFU counters decay by the minute: too slow a clock under Miri
fn allkeys_lfu_keeps_warm_keys_over_unread_ones() {
    fastrand::seed(5);
    let mut d = full_db("allkeys-lfu", 900);
    for _ in 0..20 {
        for i in 0..300 {
            answer(&mut d, &format!("GET k{i}\r\n"));
        }
    }
    let value = "w".repeat(100);
    for i in 0..600 {
        assert_eq!(answer(&mut d, &format!("SET new{i} {value}\r\n")), "+OK\r\n");
    }
    answer(&mut d, "PING\r\n");
    let warm = (0..300).filter(|i| exists(&mut d, &format!("k{i}"))).count();
    assert!(warm >= 285, "{warm} of 300 warm keys kept");
}

#[test]
fn the_command_table_is_sorted_for_its_bisection() {
    let names: Vec<&str> = super::COMMANDS.iter().map(|c| c.0).collect();
    for pair in names.windows(2) {
        assert!(pair[0] < pair[1], "{} before {}: the table must stay sorted", pair[0], pair[1]);
    }
}

/// Commands are counted (calls, failed, rejected) and slow-logged (here
/// every one, at a threshold of 0); the log keeps its bound and cuts long
/// arguments; CONFIG RESETSTAT starts the counts again.
#[test]
fn commands_are_counted_and_slow_logged() {
    let mut d = db();
    answer(&mut d, "CONFIG SET slowlog-log-slower-than 0\r\nSET a 1\r\nLPUSH a x\r\nGET\r\nNOSUCH\r\n");
    let long = "y".repeat(300);
    answer(&mut d, &format!("SET b {long}\r\n"));
    let stats = answer(&mut d, "INFO commandstats\r\n");
    assert!(stats.contains("cmdstat_set:calls=2,"), "{stats}");
    assert!(stats.contains("cmdstat_lpush:calls=1,") && stats.contains("failed_calls=1"), "{stats}");
    assert!(stats.contains("cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0"), "{stats}");
    assert!(stats.contains("cmdstat_config|set:calls=1,"), "{stats}");
    let errors = answer(&mut d, "INFO errorstats\r\n");
    assert!(errors.contains("errorstat_ERR:count=2") && errors.contains("errorstat_WRONGTYPE:count=1"), "{errors}");
    // The 300-byte value cut at 128 bytes (the latest entries are the INFOs).
    let last = answer(&mut d, "SLOWLOG GET 3\r\n");
    assert!(last.contains(&format!("${}\r\n{}... (172 more bytes)\r\n", 128 + 20, "y".repeat(128))), "{last}");
    // CONFIG SET, SET, LPUSH, SET b, the two INFOs, SLOWLOG GET: 7 (the
    // refused GET and the unknown command are not logged).
    assert_eq!(answer(&mut d, "SLOWLOG LEN\r\n"), ":7\r\n");
    answer(&mut d, "CONFIG SET slowlog-max-len 2\r\n");
    assert_eq!(answer(&mut d, "SLOWLOG LEN\r\n"), ":2\r\n");
    answer(&mut d, "CONFIG RESETSTAT\r\n");
    let errors = answer(&mut d, "INFO errorstats\r\n");
    assert!(!errors.contains("errorstat_"), "{errors}");
    assert!(answer(&mut d, "INFO stats\r\n").contains("total_error_replies:0\r\n"));
}

/// HSCAN, SSCAN and ZSCAN of large collections go COUNT entries a call
/// (small ones whole, in one call, as Redis's listpacks), and return every
/// entry that stays while others come and go.
#[test]
fn collection_scans_return_every_entry_that_stays_count_at_a_time() {
    let mut d = db();
    let n = if cfg!(miri) { 260 } else { 1000 };
    for i in 0..n {
        answer(&mut d, &format!("HSET h f{i} v\r\nSADD s m{i}\r\nZADD z {i} m{i}\r\n"));
    }
    answer(&mut d, "HSET small a 1 b 2\r\nSADD smalls a b c\r\nZADD smallz 1 a 2 b\r\n");
    for (cmd, key, what, churn) in [
        ("HSCAN", "h", "f", "HDEL h f{d} f{e}\r\nHSET h new{c} v\r\n"),
        ("SSCAN", "s", "m", "SREM s m{d} m{e}\r\nSADD s new{c}\r\n"),
        ("ZSCAN", "z", "m", "ZREM z m{d} m{e}\r\nZADD z -1 new{c}\r\n"),
    ] {
        let mut seen = std::collections::HashSet::new();
        let (mut cursor, mut calls) = ("0".to_owned(), 0usize);
        loop {
            let got = answer(&mut d, &format!("{cmd} {key} {cursor} COUNT 20\r\n"));
            let lines: Vec<&str> = got.split("\r\n").collect();
            cursor = lines[2].to_owned();
            // Fields or members are every other line (hashes and sorted
            // sets alternate them with values and scores).
            let step = if cmd == "SSCAN" { 1 } else { 2 };
            for name in lines[4..].iter().skip(1).step_by(2).step_by(step) {
                seen.insert((*name).to_owned());
            }
            calls += 1;
            // Churn: the first 200 entries go, two a call, and one new
            // one comes (so that the last entries, moved into the holes,
            // are soon old ones).
            let (gone, gone2) = ((2 * calls) % 200, (2 * calls + 1) % 200);
            let churn = churn.replace("{c}", &calls.to_string()).replace("{d}", &gone.to_string());
            answer(&mut d, &churn.replace("{e}", &gone2.to_string()));
            if cursor == "0" {
                break;
            }
            assert!(calls < 10 * n, "{cmd} ends");
        }
        let missed: Vec<String> = (200..n).map(|i| format!("{what}{i}")).filter(|e| !seen.contains(e)).collect();
        assert!(missed.is_empty(), "{cmd}: {} missed, e.g. {:?}", missed.len(), missed.first());
        assert!(calls >= n / 20 / 2, "{cmd}: {calls} calls: COUNT at a time");
    }
    assert_eq!(
        answer(&mut d, "HSCAN small 0 COUNT 1\r\n"),
        "*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert!(answer(&mut d, "SSCAN smalls 0 COUNT 1\r\n").starts_with("*2\r\n$1\r\n0\r\n*3\r\n"));
    assert!(answer(&mut d, "ZSCAN smallz 0 COUNT 1\r\n").starts_with("*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n"));
    assert_eq!(answer(&mut d, "HSCAN h x\r\n"), "-ERR invalid cursor\r\n");
}

/// INFO cpu: the process's and this thread's CPU seconds, Redis's fields
/// (read from /proc: the process has used at least what this thread has).
#[test]
fn info_cpu_reports_the_processes_cpu_time() {
    let mut d = db();
    if !cfg!(miri) {
        // Past the 10 ms the kernel counts in.
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(50) {
            std::hint::black_box(answer(&mut d, "PING\r\n"));
        }
    }
    let text = answer(&mut d, "INFO cpu\r\n");
    let field = |name: &str| -> f64 {
        let line =
            text.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap_or_else(|| panic!("{name}: {text}"));
        line.split_once(':').unwrap().1.parse().unwrap()
    };
    assert!(text.contains("# CPU\r\n"), "{text}");
    for f in ["used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"] {
        assert!(field(f) >= 0.0);
    }
    if !cfg!(miri) {
        assert!(field("used_cpu_user") + 0.011 >= field("used_cpu_user_main_thread"), "{text}");
        assert!(field("used_cpu_user") + field("used_cpu_sys") > 0.0, "the test process has run: {text}");
    }
    assert!(answer(&mut d, "INFO\r\n").contains("used_cpu_sys:"), "in the default sections");
}
