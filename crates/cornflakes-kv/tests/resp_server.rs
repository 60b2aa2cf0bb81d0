//! The RESP front end over the tcp datapath, driven by raw sockets and by
//! the real Redis tools: `redis-cli` through a script whose answers must
//! be the ones `redis-server` gives, and `redis-benchmark`. Tests that need
//! the Redis programs skip, saying so, when they are not installed
//! (`scripts/setup.sh` installs them).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cornflakes_datapath::tcp::{Framing, TcpConfig, TcpDatapath};
use cornflakes_datapath::Datapath;
use cornflakes_kv::resp::{self, resp_limits, RespDb, RespStats, ServeOptions, DEFAULT_THRESHOLD};
use cornflakes_kv::Store;

/// Our server, on a thread of its own; stopped (and its counters
/// returned) by [`Server::stop`].
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<RespStats>>,
}

impl Server {
    fn start(options: ServeOptions) -> Server {
        Server::start_with(options, |c| c)
    }

    /// With the tcp datapath's settings changed by `tcp`.
    fn start_with(options: ServeOptions, tcp: impl FnOnce(TcpConfig) -> TcpConfig + Send + 'static) -> Server {
        Server::launch(options, tcp, |_| {})
    }

    /// With `setup` run on the databases before serving.
    fn launch(
        options: ServeOptions,
        tcp: impl FnOnce(TcpConfig) -> TcpConfig + Send + 'static,
        setup: impl FnOnce(&mut RespDb) + Send + 'static,
    ) -> Server {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let config = TcpConfig {
                framing: Framing::Raw,
                max_queued_bytes: 64 << 20,
                pool_config: cornflakes::PoolConfig {
                    hugepages: cornflakes::mem::HugePages::Never,
                    ..Default::default()
                },
                ..TcpConfig::loopback()
            };
            let mut dp = TcpDatapath::bind("127.0.0.1:0".parse().unwrap(), tcp(config)).expect("tcp datapath");
            let mut db = RespDb::new(Store::new(dp.pool().clone(), resp_limits()), DEFAULT_THRESHOLD);
            setup(&mut db);
            tx.send(dp.local_addrs()[0]).unwrap();
            resp::serve(&mut dp, &mut db, &options, |_| !flag.load(Ordering::Relaxed)).expect("serve")
        });
        let addr = rx.recv_timeout(Duration::from_secs(20)).expect("server started");
        Server { addr, stop, thread: Some(thread) }
    }

    fn stop(mut self) -> RespStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().expect("server thread")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads exactly `n` bytes.
fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).unwrap();
    buf
}

/// Whether the peer closed (EOF) within the read timeout.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", v.len()).into_bytes();
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
    out
}

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(bulk(a));
    }
    out
}

#[test]
fn pipelined_commands_split_anywhere_are_answered_in_order() {
    let server = Server::start(ServeOptions::default());
    let mut c = connect(server.addr);
    let big = vec![b'v'; 5000];
    let mut stream = command(&[b"SET", b"k", &big]);
    stream.extend(b"GET k\r\n");
    stream.extend(command(&[b"MGET", b"k", b"nokey"]));
    stream.extend(b"PING\r\n");
    // One byte at a time: every command arrives in pieces.
    for b in &stream {
        c.write_all(std::slice::from_ref(b)).unwrap();
    }
    let mut want = b"+OK\r\n".to_vec();
    want.extend(bulk(&big));
    want.extend(b"*2\r\n");
    want.extend(bulk(&big));
    want.extend(b"$-1\r\n+PONG\r\n");
    assert_eq!(read_n(&mut c, want.len()), want);
    let stats = server.stop();
    assert_eq!(stats.commands, 4);
}

#[test]
fn replies_larger_than_one_send_arrive_whole() {
    // 100 distinct 20 KiB elements: a 2 MB reply, over the datapath's
    // largest message, sent as several; also pipelined twice with a small
    // reply between.
    let server = Server::start(ServeOptions::default());
    let mut c = connect(server.addr);
    let elems: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 20 << 10]).collect();
    let mut rpush: Vec<&[u8]> = vec![b"RPUSH", b"l"];
    rpush.extend(elems.iter().map(|e| e.as_slice()));
    c.write_all(&command(&rpush)).unwrap();
    assert_eq!(read_n(&mut c, 6), b":100\r\n");
    c.write_all(b"LRANGE l 0 -1\r\nPING\r\nLRANGE l 0 -1\r\n").unwrap();
    let mut one = b"*100\r\n".to_vec();
    for e in &elems {
        one.extend(bulk(e));
    }
    let mut want = one.clone();
    want.extend(b"+PONG\r\n");
    want.extend(&one);
    assert!(read_n(&mut c, want.len()) == want, "the replies differ from the list");
    server.stop();
}

#[test]
fn a_reply_larger_than_the_send_queue_goes_out_as_the_client_reads() {
    // 70 x 1 MiB from one MGET (and 100 pipelined GETs of it) is more than
    // the connection's 64 MiB queue: the server used to close the client
    // with nothing sent; Redis sends it all.
    let server = Server::start(ServeOptions::default());
    let mut c = connect(server.addr);
    let value = vec![b'v'; 1 << 20];
    c.write_all(&command(&[b"SET", b"big", &value])).unwrap();
    assert_eq!(read_n(&mut c, 5), b"+OK\r\n");
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(std::iter::repeat_n(&b"big"[..], 70));
    let mut input = command(&mget);
    input.extend(b"GET big\r\n".repeat(100));
    input.extend(b"PING\r\n");
    c.write_all(&input).unwrap();
    let one = bulk(&value);
    let mut want = b"*70\r\n".to_vec();
    // The MGET's 70 elements, then the 100 GETs' replies: the same bulk.
    for _ in 0..170 {
        want.extend(&one);
    }
    want.extend(b"+PONG\r\n");
    // Read slowly at first: the queue fills and the rest must wait.
    std::thread::sleep(Duration::from_millis(300));
    assert!(read_n(&mut c, want.len()) == want, "the replies differ");
    let stats = server.stop();
    assert_eq!(stats.reply_dropped, 0);
}

#[test]
fn a_client_that_reads_nothing_of_a_large_reply_is_disconnected_in_time() {
    let server = Server::start(ServeOptions { not_reading: Duration::from_millis(300), ..ServeOptions::default() });
    let mut c = connect(server.addr);
    let value = vec![b'v'; 1 << 20];
    c.write_all(&command(&[b"SET", b"big", &value])).unwrap();
    assert_eq!(read_n(&mut c, 5), b"+OK\r\n");
    c.write_all(&b"GET big\r\n".repeat(200)).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let mut other = connect(server.addr);
    other.write_all(b"PING\r\n").unwrap();
    assert_eq!(read_n(&mut other, 7), b"+PONG\r\n", "the others are served meanwhile");
    let stats = server.stop();
    assert_eq!(stats.reply_dropped, 1, "{stats:?}");
}

#[test]
fn a_set_while_replies_holding_the_old_value_wait_does_not_change_them() {
    let server = Server::start(ServeOptions::default());
    let old = vec![b'o'; 64 << 10];
    let mut writer = connect(server.addr);
    writer.write_all(&command(&[b"SET", b"k", &old])).unwrap();
    assert_eq!(read_n(&mut writer, 5), b"+OK\r\n");
    // In one receive: the first GET's reply references the stored buffer;
    // the SET then swaps a same-sized value in (the pool would hand the
    // old slot out again if the reply did not hold it).
    let mut reader = connect(server.addr);
    let new = vec![b'n'; 64 << 10];
    let mut pipeline = b"GET k\r\n".to_vec();
    pipeline.extend(command(&[b"SET", b"k", &new]));
    pipeline.extend(b"GET k\r\n");
    reader.write_all(&pipeline).unwrap();
    let mut want = bulk(&old);
    want.extend(b"+OK\r\n");
    want.extend(bulk(&new));
    assert_eq!(read_n(&mut reader, want.len()), want);
    // A client that does not read: 200 replies of 64 KiB wait in the
    // kernel and the datapath's queue while another client replaces the
    // value 50 times (every SET allocates a 64 KiB buffer).
    let mut slow = connect(server.addr);
    slow.write_all(&b"GET k\r\n".repeat(200)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    for i in 0..50u8 {
        writer.write_all(&command(&[b"SET", b"k", &vec![i; 64 << 10]])).unwrap();
        assert_eq!(read_n(&mut writer, 5), b"+OK\r\n");
    }
    let one = bulk(&new);
    for i in 0..200 {
        assert!(read_n(&mut slow, one.len()) == one, "reply {i} changed while it waited");
    }
    server.stop();
}

#[test]
fn bad_clients_are_disconnected_and_counted_while_others_are_served() {
    let options = ServeOptions {
        limits: cornflakes_resp::Limits { max_query_buffer: 64 << 10, ..ServeOptions::default().limits },
        ..ServeOptions::default()
    };
    let server = Server::start(options);
    let mut good = connect(server.addr);
    good.write_all(b"SET a 1\r\n").unwrap();
    assert_eq!(read_n(&mut good, 5), b"+OK\r\n");

    let mut garbage = connect(server.addr);
    garbage.write_all(b"*x\r\n").unwrap();
    let want = b"-ERR Protocol error: invalid multibulk length\r\n";
    assert_eq!(read_n(&mut garbage, want.len()), want);
    assert!(closed(&mut garbage), "closed after the error");

    let mut too_long = connect(server.addr);
    too_long.write_all(b"*2\r\n$3\r\nSET\r\n$2000000\r\n").unwrap();
    let want = b"-ERR Protocol error: invalid bulk length\r\n";
    assert_eq!(read_n(&mut too_long, want.len()), want);
    assert!(closed(&mut too_long));

    // A bulk within the bulk limit that never ends: closed at the query
    // buffer limit, without a reply (as Redis does).
    let mut hoarder = connect(server.addr);
    hoarder.write_all(b"*2\r\n$3\r\nGET\r\n$900000\r\n").unwrap();
    let _ = hoarder.write_all(&[b'x'; 100 << 10]);
    assert!(closed(&mut hoarder));

    let mut quitter = connect(server.addr);
    quitter.write_all(b"PING\r\nQUIT\r\n").unwrap();
    assert_eq!(read_n(&mut quitter, 12), b"+PONG\r\n+OK\r\n");
    assert!(closed(&mut quitter));

    good.write_all(b"GET a\r\n").unwrap();
    assert_eq!(read_n(&mut good, 7), b"$1\r\n1\r\n");
    let stats = server.stop();
    assert_eq!((stats.protocol_errors, stats.query_buffer_full, stats.quit), (2, 1, 1), "{stats:?}");
}

/// What a client sent after QUIT, or after a protocol error, is never run,
/// however much of it was already received (before, input queued in the
/// datapath re-created the closed connection and ran: found by an operator
/// review with `QUIT` and 100 000 pipelined `INCR`s). A phantom connection
/// is never counted either.
#[test]
fn input_after_quit_or_a_protocol_error_is_never_run() {
    let server = Server::start(ServeOptions::default());
    let mut quitter = connect(server.addr);
    let mut stream = b"QUIT\r\n".to_vec();
    stream.extend(b"INCR after_quit\r\n".repeat(100_000));
    let _ = quitter.write_all(&stream);
    assert_eq!(read_n(&mut quitter, 5), b"+OK\r\n");
    assert!(closed(&mut quitter));

    // A bulk past the limit whose bytes are commands.
    let mut injector = connect(server.addr);
    let mut stream = b"*3\r\n$3\r\nSET\r\n$1\r\nv\r\n$2000000\r\n".to_vec();
    stream.extend(b"INCR injected\r\n".repeat(2_000_000 / 15));
    let _ = injector.write_all(&stream);
    let want = b"-ERR Protocol error: invalid bulk length\r\n";
    assert_eq!(read_n(&mut injector, want.len()), want);
    assert!(closed(&mut injector));

    std::thread::sleep(Duration::from_millis(200));
    let mut c = connect(server.addr);
    c.write_all(b"GET after_quit\r\nGET injected\r\nINFO clients\r\n").unwrap();
    assert_eq!(read_n(&mut c, 10), b"$-1\r\n$-1\r\n", "nothing sent after the close ran");
    let mut header = Vec::new();
    while !header.ends_with(b"\r\n") {
        header.extend(read_n(&mut c, 1));
    }
    let n: usize = String::from_utf8_lossy(&header).trim_start_matches('$').trim().parse().unwrap();
    let text = String::from_utf8(read_n(&mut c, n + 2)).unwrap();
    assert!(text.contains("connected_clients:1\r\n"), "no phantom connection: {text}");
    let stats = server.stop();
    assert_eq!((stats.quit, stats.protocol_errors), (1, 1), "{stats:?}");
}

/// Short-lived keys nobody reads again are reclaimed while the server
/// idles, so a TTL cache under `maxmemory` keeps taking writes (before, an
/// operator review saw 2 489 of 3 000 such writes refused and DBSIZE 511).
#[test]
fn expired_keys_nobody_reads_are_reclaimed_and_free_maxmemory() {
    let server = Server::start(ServeOptions::default());
    let mut c = connect(server.addr);
    c.write_all(b"CONFIG SET maxmemory 300kb\r\n").unwrap();
    assert_eq!(read_n(&mut c, 5), b"+OK\r\n");
    let value = vec![b'v'; 1000];
    let mut refused = 0;
    // Rounds half a second apart: the idle loop wakes every 100 ms, so a
    // loaded CI machine has several chances to reclaim a round's keys.
    for round in 0..6 {
        let mut stream = Vec::new();
        for k in 0..200 {
            stream.extend(command(&[b"SET", format!("k{round}:{k}").as_bytes(), &value, b"PX", b"30"]));
        }
        c.write_all(&stream).unwrap();
        for _ in 0..200 {
            let mut line = Vec::new();
            while !line.ends_with(b"\r\n") {
                line.extend(read_n(&mut c, 1));
            }
            refused += usize::from(line.starts_with(b"-OOM"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(refused, 0, "every write taken: the expired keys' memory came back");
    c.write_all(b"DBSIZE\r\n").unwrap();
    assert_eq!(read_n(&mut c, 4), b":0\r\n", "all 1 200 keys reclaimed");
    server.stop();
}

/// The path of `program`, or `None` (with a message) when it is missing.
fn find(program: &str) -> Option<()> {
    let found = Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "a test partner is missing under CI: scripts/setup.sh must install it"
        );
        eprintln!("SKIPPED: `{program}` is not installed (scripts/setup.sh installs redis-server and redis-tools)");
    }
    found.then_some(())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A `redis-server` on a free port, persistence off; killed on drop.
struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// With more arguments (`--maxclients 1`, ...).
    fn start_with(args: &[&str]) -> RedisServer {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start on port {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        RedisServer { child, port }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `script` through `redis-cli` against redis-server and ours, and
/// asserts the answers are the same, line by line (redis-server's more
/// than `min_lines` of them, so that the script did run).
fn same_answers(theirs_port: u16, ours_port: u16, script: &str, min_lines: usize) {
    let theirs = redis_cli(theirs_port, script);
    let mine = redis_cli(ours_port, script);
    assert!(theirs.len() > min_lines, "redis-server answered: {theirs:?}");
    for (i, (t, m)) in theirs.iter().zip(&mine).enumerate() {
        assert_eq!(m, t, "answer line {i} differs (ours, then redis-server's)");
    }
    assert_eq!(mine.len(), theirs.len(), "ours: {mine:?}");
}

/// Runs `script` (one command a line) through `redis-cli`; its output.
fn redis_cli(port: u16, script: &str) -> Vec<String> {
    let mut child = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let mut lines: Vec<String> = BufReader::new(&out.stdout[..]).lines().map(|l| l.unwrap()).collect();
    lines.extend(String::from_utf8_lossy(&out.stderr).lines().map(|l| format!("stderr: {l}")));
    lines
}

/// Commands of issue 14, item 1, with their error cases: answers must be
/// the same from both servers. (A TTL after EXAT/PXAT is not asked: its
/// rounding depends on when in the second each server runs the line.) (Left out, as answered differently on
/// purpose: INFO, COMMAND and HELLO, whose contents describe the server.)
const SCRIPT: &str = r#"FLUSHALL
PING
PING hello
ECHO "hi there"
SET k v
GET k
GET missing
SET k v2 NX
SET k v3 XX
GET k
SET n1 v NX
SET n2 v XX
GET n2
SET k v4 GET
SET t 1 EX 1000
TTL t
TTL k
TTL missing
SET t2 1 PX 100000 KEEPTTL
SET k v EX 0
SET k v EX abc
SET k v BOGUS
SET k v NX XX
SET k v EX 10 KEEPTTL
MSET a 1 b 2 c 3
MGET a b c missing
MSET a
DEL a b missing
EXISTS a c c
APPEND c 45
APPEND newkey abc
STRLEN c
STRLEN missing
INCR counter
INCR counter
INCR c
INCR k
SET big 9223372036854775807
INCR big
SET lead 012
INCR lead
RPUSH list a b c
LPUSH list z y
LRANGE list 0 -1
LRANGE list 1 2
LRANGE list -2 -1
LRANGE list -100 100
LRANGE list 5 10
LRANGE list 3 1
LRANGE list x 1
LRANGE missing 0 -1
LRANGE list 0
LINDEX list 0
LINDEX list -1
LINDEX list 99
LINDEX list x
LINDEX missing 0
LLEN list
LLEN missing
GET list
STRLEN list
APPEND list x
LPUSH k x
LRANGE k 0 -1
LLEN k
LINDEX k 0
INCR list
MGET k list
SET list plain
GET list
DBSIZE
SELECT 0
SELECT x
CONFIG GET save
CONFIG GET appendonly
CONFIG GET
CONFIG BOGUS
CLIENT SETNAME tester
CLIENT GETNAME
CLIENT SETNAME "a b"
CLIENT BOGUS
GET
SET onlykey
ECHO
NOSUCHCMD a b
nosuchcmd
get k
Get k
DEL list k
EXISTS list k
LLEN list
SET num 10
DECR num
INCRBY num 15
DECRBY num 30
INCRBY num x
DECRBY num -9223372036854775808
DECRBY num 9223372036854775807
INCRBY num -9223372036854775807
DECR fresh
INCRBY list2 1
TYPE num
TYPE missing
RPUSH q a b c d e
TYPE q
INCR q
LPOP q
RPOP q
LPOP q 2
RPOP q 0
RPOP q 5
EXISTS q
LPOP q
LPOP q 1
RPOP q -1
RPOP q x
LPOP num
LPOP q 1 2
RPUSH q2 only
RPOP q2
TYPE q2
LPUSH q3 c b a
RPOP q3
LPOP q3
LRANGE q3 0 -1
LPUSH q4 x
LPUSH q4 y
RPOP q4
RPOP q4
LLEN q4
SET e v
EXPIRE e 1000
TTL e
EXPIRE e 500 NX
EXPIRE e 2000 XX
TTL e
EXPIRE e 100 GT
EXPIRE e 3000 GT
TTL e
EXPIRE e 4000 LT
EXPIRE e 10 LT
TTL e
PERSIST e
PERSIST e
TTL e
EXPIRE e 10 GT
EXPIRE e 10 LT
TTL e
EXPIRE e 10 XX
EXPIRE missing 10
PERSIST missing
EXPIRE e 10 NX XX
EXPIRE e 10 GT LT
EXPIRE e 10 BOGUS
EXPIRE e abc
EXPIRE e 9223372036854775807
PEXPIRE e 9223372036854775807
PEXPIRE e 5000000
TTL e
EXPIRE e 0
EXISTS e
SET e2 v
PEXPIRE e2 -5
GET e2
EXPIRE
FLUSHALL
SET user:1 a
SET user:2 b
SET other c
KEYS other
KEYS o*
KEYS *:1
KEYS user:[2]
KEYS user:[^1]
KEYS user:[1-1]
KEYS u?er:2
KEYS \o*
KEYS nomatch*
KEYS [
KEYS
SET e3 v EX 1000
KEYS e?
CONFIG GET maxmemory
CONFIG GET maxmemory-policy
CONFIG SET maxmemory 100mb
CONFIG GET maxmemory
CONFIG SET maxmemory 2gb
CONFIG GET maxmemory
CONFIG SET maxmemory 0
CONFIG SET maxmemory abc
CONFIG SET nosuch 1
CONFIG SET maxmemory
CONFIG GET maxmemory
FLUSHALL
DBSIZE
SETEX sx 100 v
TTL sx
GET sx
SETEX sx 0 v
SETEX sx -5 v
SETEX sx abc v
SETEX sx 10
PSETEX px 100000 v
TTL px
PSETEX px 0 v
SETNX nx 1
SETNX nx 2
GET nx
RPUSH nxl a
SETNX nxl x
GETSET nx 3
GETSET fresh 1
GETSET nxl x
GET nx
GETDEL nx
GETDEL nx
EXISTS nx
GETDEL nxl
GETEX sx
GETEX sx PERSIST
TTL sx
GETEX sx EX 500
TTL sx
GETEX sx PX 9000000
TTL sx
GETEX sx EXAT 99999999999
PERSIST sx
GETEX sx EX 0
GETEX sx EX abc
GETEX sx BOGUS
GETEX sx EX 1 PX 1
GETEX missing EX 10
GETEX nxl
SET at v EXAT 99999999999
PERSIST at
SET at v PXAT 99999999999000
PERSIST at
SET at v EXAT 1
GET at
SET at v EXAT 0
SET at v EX 10 EXAT 99999999999
FLUSHDB
DBSIZE
FLUSHDB ASYNC
FLUSHDB BOGUS
EXEC
DISCARD
MULTI
SET tx 1
INCR tx
GET tx
LPUSH tx x
MULTI
EXEC
GET tx
MULTI
SET tx2 1
DISCARD
GET tx2
MULTI
SET tx3 1
NOSUCHCMD
GET tx3
EXEC
GET tx3
MULTI
SET tx4 1
GET
EXEC
EXISTS tx4
MULTI
EXEC
SET r1 a
EXPIRE r1 1000
RENAME r1 r2
GET r1
GET r2
TTL r2
RENAME r2 r2
GET r2
RENAME nosuch r3
RPUSH rl a b
RENAME rl r2
TYPE r2
LRANGE r2 0 -1
SET r4 x
RENAMENX r4 r2
RENAMENX r4 r5
RENAMENX r5 r5
RENAMENX nosuch r6
GET r5
UNLINK r5 r2 nosuch
TOUCH r4 r5 r4
SET ea v
EXPIREAT ea 99999999999
PERSIST ea
PEXPIREAT ea 99999999999000
PERSIST ea
EXPIREAT ea 99999999999 NX
EXPIREAT ea 1
EXISTS ea
SET ea v
PEXPIREAT ea 0
GET ea
EXPIREAT missing 99999999999
EXPIREAT ea abc
EXPIREAT ea 9223372036854775807
"#;

#[test]
fn redis_cli_gets_the_answers_redis_server_gives() {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    same_answers(redis.port, ours.addr.port(), SCRIPT, 100);
    // What differs on purpose: RESP3.
    assert_eq!(redis_cli(ours.addr.port(), "HELLO 3\n")[0], "NOPROTO unsupported protocol version");
    assert!(redis_cli(ours.addr.port(), "INFO\n").iter().any(|l| l.starts_with("redis_version:")));
    ours.stop();
}

/// Hashes: every answer is redis-server's, errors and kinds included
/// (fields in insertion order, as both servers keep a hash of at most 128
/// fields; a value past the zero-copy threshold replied by reference).
const HASH_SCRIPT: &str = r#"FLUSHALL
HSET h f1 v1 f2 v2 f3 v3
HSET h f2 w2 f4 v4
HGET h f2
HGET h nosuch
HGET nokey f1
HMGET h f1 nosuch f4
HMGET nokey a b
HGETALL h
HKEYS h
HVALS h
HLEN h
HLEN nokey
HSTRLEN h f1
HSTRLEN h nosuch
HEXISTS h f1
HEXISTS h nosuch
HSETNX h f1 again
HSETNX h f5 v5
HGET h f1
HDEL h f2 nosuch f2
HGETALL h
HSET h f2 back
HKEYS h
HINCRBY h n 5
HINCRBY h n -7
HINCRBY h f1 1
HINCRBY h n x
HINCRBY h n 9223372036854775807
HSET h max 9223372036854775807
HINCRBY h max 1
HSET h odd
HSET h a b c
HMSET h m1 1 m2 2
HMSET h m3
TYPE h
SET s v
HGET s f
HSET s f v
HGETALL s
HDEL s f
HLEN s
GET h
LPUSH h x
INCR h
SET h v GET
RPUSH l a
HSET l f v
HSCAN h 0
HSCAN h 0 MATCH m*
HSCAN h 0 COUNT 2 MATCH f?
HSCAN h x
HSCAN h -1
HSCAN nokey 0
HSET big v {big}
HSTRLEN big v
HGET big v
HGETALL big
EXPIRE h 1000
HSET h f9 v9
TTL h
RENAME h h2
HGET h2 f9
TTL h2
EXISTS h h2
HDEL h2 f1 f3 f4 f5 n max m1 m2 f2 f9
EXISTS h2
TTL h2
HSET h3 a 1
DBSIZE
KEYS h*
SCAN 0 TYPE hash MATCH h*
SET h3 plain
TYPE h3
GET h3
DEL big h3
DBSIZE
"#;

#[test]
fn hashes_answer_as_redis_server_does() {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let script = HASH_SCRIPT.replace("{big}", &"x".repeat(700));
    same_answers(redis.port, ours.addr.port(), &script, 80);
    ours.stop();
}

/// Sets, one command a `redis-cli` run: each answer is redis-server's,
/// compared as it is (`=`), as a set of lines (`~`: members come in an
/// order of each server's own), by its number of lines (`#`: a random
/// pick), or by the lines ours gives (`^`: a prefix of theirs).
const SET_SCRIPT: &str = r#"= FLUSHALL
= SADD s a b c d
= SADD s c d e
= SCARD s
= SCARD nokey
= SISMEMBER s a
= SISMEMBER s z
= SISMEMBER nokey a
= SMISMEMBER s a z e
~ SMEMBERS s
= SMEMBERS nokey
= SREM s a z
= SREM nokey a
= SCARD s
= SADD t c d x y
= SADD u d y
~ SINTER s t
~ SINTER s t u
= SINTER s nokey
~ SUNION s t u
= SUNION nokey
~ SDIFF s t
~ SDIFF s nokey
= SDIFF nokey s
= SINTERSTORE dst s t
~ SMEMBERS dst
= SUNIONSTORE dst s u
= SCARD dst
= SDIFFSTORE dst s s
= EXISTS dst
= SET str v
= SADD str a
= SCARD str
= SINTER s str
= SINTER nokey str
= SUNIONSTORE dst2 s str
= SINTERCARD 2 s t
= SINTERCARD 2 s t LIMIT 1
= SINTERCARD 0 s
= SINTERCARD 3 s t
= SINTERCARD 2 s t LIMIT -1
= SINTERCARD 2 s t BOGUS 1
= SINTERCARD x s
= SMOVE s t b
= SISMEMBER t b
= SISMEMBER s b
= SMOVE s t nosuch
= SMOVE nokey t a
= SMOVE nokey str a
= SMOVE s str c
= SMOVE str s a
= SMOVE s s c
= SMOVE s s zz
= SMOVE s newset c
= TYPE newset
= SPOP nokey
= SPOP nokey 2
= SPOP s -1
= SPOP s 1 2
= SPOP str
= SRANDMEMBER nokey
= SRANDMEMBER nokey 3
= SRANDMEMBER s 0
= SRANDMEMBER s 1 2
= SRANDMEMBER s x
# SRANDMEMBER t 2
# SRANDMEMBER t -7
# SRANDMEMBER t 100
= SADD one only
= SPOP one
= EXISTS one
= SADD one only
= SRANDMEMBER one
= SRANDMEMBER one -3
= SRANDMEMBER one 5
= SPOP one 5
= EXISTS one
= SADD p 1 2 3 4 5
# SPOP p 2
= SCARD p
# SPOP p 5
= EXISTS p
~ SSCAN t 0
= SSCAN t 0 MATCH x*
= SSCAN t x
= SSCAN str 0
= SADD k
= EXPIRE t 1000
= SADD t q
= TTL t
= SUNIONSTORE t s
= TTL t
= RENAME t t2
~ SMEMBERS t2
= SCAN 0 TYPE set MATCH t*
= DEL t2 s u
= DBSIZE
"#;

/// Runs each line of `script` (`= `, `~ `, `^ ` or `# ` and a command, as
/// [`SET_SCRIPT`]) through its own `redis-cli` against redis-server and
/// ours, and compares the answers as the line says.
fn same_answers_line_by_line(script: &str) {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let ask = |port: u16, args: &[&str]| {
        let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().expect("redis-cli");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        text.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    for line in script.lines() {
        let (how, command) = line.split_once(' ').unwrap();
        let args = words(command);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (mut theirs, mut mine) = (ask(redis.port, &args), ask(ours.addr.port(), &args));
        match how {
            "=" => {}
            "~" => {
                theirs.sort();
                mine.sort();
            }
            // Ours is the start of theirs (COMMAND INFO: Redis 7.0 adds
            // ACL categories, tips and key specs after the six fields).
            "^" => theirs.truncate(mine.len()),
            _ => (theirs, mine) = (vec![theirs.len().to_string()], vec![mine.len().to_string()]),
        }
        assert_eq!(mine, theirs, "{command} (ours, then redis-server's)");
    }
    ours.stop();
}

/// The words of `command`, split at spaces; `"a b"` is one word, `""` an
/// empty one.
fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = command.trim();
    while !rest.is_empty() {
        let (word, after) = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').expect("closing quote"),
            None => rest.split_once(' ').unwrap_or((rest, "")),
        };
        out.push(word.to_owned());
        rest = after.trim_start();
    }
    out
}

#[test]
fn sets_answer_as_redis_server_does() {
    same_answers_line_by_line(SET_SCRIPT);
}

/// The list and string commands beyond the basic ones, with their error
/// cases.
const LIST_AND_STRING_SCRIPT: &str = r#"= FLUSHALL
= RPUSH l a b c d e f
= LSET l 0 A
= LSET l -1 F
= LSET l 6 x
= LSET l x y
= LSET nokey 0 x
= LRANGE l 0 -1
= LINSERT l BEFORE c C
= LINSERT l AFTER F G
= LINSERT l AFTER nosuch x
= LINSERT l MIDDLE c x
= LINSERT nokey BEFORE a b
= LRANGE l 0 -1
= RPUSH r x y x z x w x
= LREM r 2 x
= LRANGE r 0 -1
= LREM r -1 x
= LRANGE r 0 -1
= LREM r 0 x
= LRANGE r 0 -1
= LREM r 0 nosuch
= LREM nokey 1 a
= LREM r x a
= RPUSH p a b c a b c a
= LPOS p a
= LPOS p a RANK 2
= LPOS p a RANK -1
= LPOS p a COUNT 0
= LPOS p a COUNT 2 RANK -1
= LPOS p c MAXLEN 2
= LPOS p nosuch
= LPOS p nosuch COUNT 2
= LPOS p a RANK 0
= LPOS p a COUNT -1
= LPOS p a MAXLEN -1
= LPOS p a BOGUS 1
= LPOS p a RANK
= LPOS nokey a
= LTRIM p 1 -2
= LRANGE p 0 -1
= LTRIM p 2 1
= EXISTS p
= LTRIM nokey 0 1
= LTRIM l x 1
= RPUSH m 1 2 3
= LMOVE m n LEFT RIGHT
= LMOVE m n RIGHT LEFT
= LRANGE m 0 -1
= LRANGE n 0 -1
= LMOVE m m LEFT RIGHT
= LMOVE m n UP DOWN
= LMOVE nokey n LEFT LEFT
= RPOPLPUSH n m
= RPOPLPUSH n m
= EXISTS n
= LRANGE m 0 -1
= SET s v
= LMOVE m s LEFT LEFT
= LMOVE s m LEFT LEFT
= LLEN m
= RPOPLPUSH nokey s
= LPUSHX nokey a
= RPUSHX m x y
= LPUSHX m w
= LRANGE m 0 -1
= LPUSHX s a
= RPUSH one a b
= LTRIM one 0 0
= TYPE one
= LRANGE one 0 -1
= SET str "Hello World"
= GETRANGE str 0 4
= GETRANGE str -5 -1
= GETRANGE str -3 -5
= GETRANGE str 5 100
= GETRANGE str 100 200
= GETRANGE str -100 2
= GETRANGE str x 1
= GETRANGE nokey 0 10
= GETRANGE l 0 1
= SUBSTR str 0 2
= SET n 12345
= GETRANGE n 1 2
= SETRANGE str 6 Redis
= GET str
= SETRANGE pad 5 x
= STRLEN pad
= SETRANGE empty 3 ""
= EXISTS empty
= SETRANGE str 2 ""
= SETRANGE str -1 x
= SETRANGE l 0 x
= EXPIRE str 1000
= SETRANGE str 0 J
= TTL str
= MSETNX a 1 b 2
= MSETNX b 3 c 4
= MGET a b c
= MSETNX c
= EXISTS c
"#;

/// Sorted sets, their options and error cases, and scores as Redis
/// prints them.
const ZSET_SCRIPT: &str = r#"= FLUSHALL
= ZADD z 1 a 2 b 3 c
= ZADD z 2.5 d 0.1 e -0 f
= ZADD z 1e20 g inf h -inf i 1.5e-7 j
= ZRANGE z 0 -1 WITHSCORES
= ZSCORE z e
= ZSCORE z f
= ZSCORE z g
= ZSCORE z nosuch
= ZMSCORE z a nosuch h
= ZCARD z
= ZCARD nokey
= ZRANK z c
= ZREVRANK z c
= ZRANK z nosuch
= ZCOUNT z 1 3
= ZCOUNT z (1 3
= ZCOUNT z (1 (3
= ZCOUNT z -inf +inf
= ZCOUNT z x 1
= ZRANGE z 1 3
= ZRANGE z -3 -1
= ZRANGE z 5 2
= ZRANGE z 0 0 REV
= ZRANGE z 0 2 REV WITHSCORES
= ZRANGE z 1 3 BYSCORE
= ZRANGE z (1 3 BYSCORE WITHSCORES
= ZRANGE z 3 1 BYSCORE REV
= ZRANGE z -inf +inf BYSCORE LIMIT 2 3
= ZRANGE z +inf -inf BYSCORE REV LIMIT 1 2 WITHSCORES
= ZRANGE z -inf +inf BYSCORE LIMIT -1 2
= ZRANGE z -inf +inf BYSCORE LIMIT 8 -1
= ZRANGE z 0 1 LIMIT 0 1
= ZRANGE z 0 1 BOGUS
= ZRANGE z 0 -1 BYSCORE BYSCORE
= ZRANGE z 0 -1 REV REV
= ZRANGE z a b
= ZRANGE z a b BYSCORE
= ZRANGEBYSCORE z 1 2.5 WITHSCORES
= ZRANGEBYSCORE z -inf (2 LIMIT 1 1
= ZREVRANGEBYSCORE z 3 1
= ZREVRANGE z 0 1 WITHSCORES
= ZREVRANGE z 0 1 LIMIT 0 1
= ZADD z NX 9 a 9 new
= ZSCORE z a
= ZADD z XX 9 a 9 new2
= ZSCORE z new2
= ZADD z XX CH 10 a 9 new
= ZADD z GT CH 5 a 11 b
= ZADD z LT CH 50 a 1 b
= ZADD z INCR 5 a
= ZADD z NX INCR 5 a
= ZADD z INCR 1 a 2 b
= ZADD z NX XX 1 a
= ZADD z GT LT 1 a
= ZADD z GT NX 1 a
= ZADD z 1
= ZADD z x a
= ZADD z 1e400 a
= ZADD z 1e-400 a
= ZADD z 0e-400 zero
= ZSCORE z zero
= ZADD z nan a
= ZINCRBY z 2.5 a
= ZINCRBY z 1 brandnew
= ZINCRBY z x a
= ZINCRBY z -inf h
= ZSCORE z h
= ZREM z a nosuch b
= ZPOPMIN z
= ZPOPMAX z 2
= ZPOPMIN z 0
= ZPOPMIN z -1
= ZPOPMIN nokey
= ZPOPMIN z 1 2
= ZREMRANGEBYRANK z 0 1
= ZRANGE z 0 -1 WITHSCORES
= ZREMRANGEBYSCORE z (0 2
= ZRANGE z 0 -1 WITHSCORES
= ZREMRANGEBYSCORE z x 1
= ZREMRANGEBYRANK z x 1
= ZSCAN z 0
= ZSCAN z 0 MATCH n*
= SET s v
= ZADD s 1 a
= ZSCORE s a
= ZRANGE s 0 -1
= ZCARD s
= ZREMRANGEBYRANK s x 1
= ZADD one 1 m
= ZREM one m
= EXISTS one
= ZADD one 1 m
= ZPOPMAX one 5
= TYPE one
= ZADD t 1 m
= TYPE t
= EXPIRE t 100
= ZADD t 2 m
= TTL t
= RENAME t t2
= ZRANGE t2 0 -1 WITHSCORES
= ZADD big 0.30000000000000004 x 123456789012345678 y -1.5 w 1e-5 v
= ZRANGE big 0 -1 WITHSCORES
"#;

#[test]
fn sorted_sets_answer_as_redis_server_does() {
    same_answers_line_by_line(ZSET_SCRIPT);
}

/// ZUNION, ZINTER, ZDIFF (and their STORE forms), ZINTERCARD, ZRANGESTORE,
/// the lexicographic forms and ZRANDMEMBER: options, errors in Redis's
/// order, sets as inputs, weights with infinities, destinations replaced
/// and deleted.
const ZSET_OPS_SCRIPT: &str = r#"= FLUSHALL
= ZADD a 1 x 2 y 3 z
= ZADD b 10 y 20 z 30 w
= SADD s y q
= SET str v
= RPUSH list e
= ZUNIONSTORE d 0 a
= ZUNIONSTORE d -1 a
= ZUNIONSTORE d x a
= ZUNIONSTORE d 99999999999999999999 a
= ZUNIONSTORE d 3 a b
= ZUNIONSTORE d 2 a b WEIGHTS 1
= ZUNIONSTORE d 2 a b WEIGHTS 1 x
= ZUNIONSTORE d 2 a b WEIGHTS 1 nan
= ZUNIONSTORE d 2 a b AGGREGATE foo
= ZUNIONSTORE d 2 a b AGGREGATE
= ZUNIONSTORE d 2 a b WITHSCORES
= ZUNIONSTORE d 2 a str WEIGHTS x
= ZUNIONSTORE d 2 list a
= ZUNIONSTORE d 2 a b
= ZRANGE d 0 -1 WITHSCORES
= ZUNIONSTORE d 3 a b s WEIGHTS 2 0.5 -1 AGGREGATE max
= ZRANGE d 0 -1 WITHSCORES
= ZUNIONSTORE d 2 a b weights 1 1 aggregate MIN
= ZRANGE d 0 -1 WITHSCORES
= ZUNION 2 a s WITHSCORES
= ZUNION 2 a b
= ZUNION 2 a b WEIGHTS inf -inf WITHSCORES
= ZUNION 2 a b WEIGHTS 0 1 WITHSCORES
= ZUNION 1 nokey WITHSCORES
= ZUNION 2 a a WITHSCORES
= ZUNION 2 a nokey WEIGHTS 2 3 AGGREGATE max WITHSCORES
= ZINTER 0 a
= ZINTER 2 a b WITHSCORES
= ZINTER 3 a b s WITHSCORES
= ZINTER 2 a nokey WITHSCORES
= ZINTER 2 a a WEIGHTS 1 2 WITHSCORES
= ZINTER 2 a b AGGREGATE min WITHSCORES
= ZINTERSTORE d 2 a b WEIGHTS 1 -1
= ZRANGE d 0 -1 WITHSCORES
= ZINTERSTORE d 2 a nokey
= EXISTS d
= ZDIFF 2 a b WITHSCORES
= ZDIFF 2 a b WEIGHTS 1 2
= ZDIFF 2 a b AGGREGATE sum
= ZDIFF 1 a
= ZDIFF 3 a nokey s WITHSCORES
= ZDIFF 2 nokey a
= ZDIFFSTORE d 0 a
= ZDIFFSTORE d 2 a b
= ZRANGE d 0 -1 WITHSCORES
= ZDIFFSTORE d 2 a a
= TYPE d
= ZINTERCARD 0 a
= ZINTERCARD 2 a b
= ZINTERCARD 2 a b LIMIT 1
= ZINTERCARD 2 a b LIMIT 0
= ZINTERCARD 2 a b LIMIT -1
= ZINTERCARD 2 a b LIMIT x
= ZINTERCARD 1 a LIMIT
= ZINTERCARD 1 a foo
= ZINTERCARD 2 a b WEIGHTS 1 1
= ZINTERCARD 2 a str
= ZINTERCARD 3 a b s
= SET d string
= EXPIRE d 1000
= ZUNIONSTORE d 1 a
= TTL d
= TYPE d
= ZADD l 0 a 0 b 0 c 0 d 0 e 0 aa 0 "" 0 b\xff
= ZRANGEBYLEX l - +
= ZRANGEBYLEX l [b (d
= ZRANGEBYLEX l b d
= ZRANGEBYLEX l [a
= ZRANGEBYLEX l - + LIMIT 1 2
= ZRANGEBYLEX l - + LIMIT -1 2
= ZRANGEBYLEX l - + LIMIT 2 -1
= ZRANGEBYLEX l - + LIMIT x 1
= ZRANGEBYLEX l - + WITHSCORES
= ZRANGEBYLEX l - + REV
= ZRANGEBYLEX l + -
= ZRANGEBYLEX l [ [
= ZRANGEBYLEX l ( (
= ZRANGEBYLEX l [ (b
= ZRANGEBYLEX l (a [c
= ZRANGEBYLEX l [b +
= ZRANGEBYLEX l - (
= ZRANGEBYLEX nokey - +
= ZRANGEBYLEX str - +
= ZREVRANGEBYLEX l + - LIMIT 0 2
= ZREVRANGEBYLEX l - +
= ZREVRANGEBYLEX l (d [b
= ZREVRANGEBYLEX l [b (d
= ZRANGE l [b [d BYLEX
= ZRANGE l [d [b BYLEX REV
= ZRANGE l [d [b BYLEX REV LIMIT 1 1
= ZRANGE l - + BYLEX WITHSCORES
= ZRANGE l - + BYLEX BYSCORE
= ZRANGE l 0 -1 LIMIT 0 -1
= ZRANGE l 0 -1 LIMIT 3 -1
= ZRANGE l 0 -1 LIMIT 0 5
= ZRANGE l x y BYLEX
= ZRANGE l (1 2 BYLEX
= ZLEXCOUNT l - +
= ZLEXCOUNT l (a (e
= ZLEXCOUNT l x y
= ZLEXCOUNT l - x
= ZLEXCOUNT nokey - +
= ZLEXCOUNT str - +
= ZREMRANGEBYLEX l [x [y
= ZREMRANGEBYLEX l (a [b
= ZREMRANGEBYLEX l a b
= ZREMRANGEBYLEX str - +
= ZRANGE l 0 -1
= ZREMRANGEBYLEX l - +
= EXISTS l
= ZRANGESTORE d a 0 -1
= ZRANGE d 0 -1 WITHSCORES
= ZRANGESTORE d a 0 -1 WITHSCORES
= ZRANGESTORE d b (10 +inf BYSCORE
= ZRANGE d 0 -1 WITHSCORES
= ZRANGESTORE d b +inf -inf BYSCORE REV LIMIT 0 2
= ZRANGE d 0 -1 WITHSCORES
= ZRANGESTORE d b 0 0 REV
= ZRANGE d 0 -1 WITHSCORES
= ZRANGESTORE d b 5 6
= EXISTS d
= ZRANGESTORE d nokey 0 -1
= ZRANGESTORE d str 0 -1
= ZRANGESTORE d s 0 -1
= ZRANGESTORE d b 0 -1 LIMIT 0 1
= ZRANGESTORE d b x 1
= ZRANGESTORE b b 1 -1
= ZRANGE b 0 -1 WITHSCORES
= ZRANDMEMBER nokey
= ZRANDMEMBER nokey 3
= ZRANDMEMBER nokey 3 WITHSCORES
= ZRANDMEMBER b 0
= ZRANDMEMBER b x
= ZRANDMEMBER b x foo
= ZRANDMEMBER b 1 foo
= ZRANDMEMBER b 1 WITHSCORES x
= ZRANDMEMBER b -9223372036854775808
= ZRANDMEMBER b 4611686018427387904 WITHSCORES
= ZRANDMEMBER b -4611686018427387904 WITHSCORES
= ZRANDMEMBER b 5 withscore
= ZRANDMEMBER str
= ZRANDMEMBER str 1
~ ZRANDMEMBER b 5 WITHSCORES
~ ZRANDMEMBER a 3
# ZRANDMEMBER a
# ZRANDMEMBER a 2
# ZRANDMEMBER a 2 WITHSCORES
# ZRANDMEMBER a -7
# ZRANDMEMBER a -7 withscores
= HRANDFIELD nokey x foo
= HSET h f v
= HRANDFIELD h 4611686018427387904 WITHVALUES
= HRANDFIELD h x WITHVALUES
= SRANDMEMBER s -9223372036854775808
= SRANDMEMBER s x y
= ZADD hz 0x10 a 0x1p-3 b 0x.8p1 c
= ZADD hz 0x1 d 0X1P4 e
= ZADD hz 0x f
= ZADD hz 0x1p f
= ZADD hz 1e400 f
= ZADD hz 1e-400 f
= ZADD hz 4.9e-324 g
= ZRANGE hz 0 -1 WITHSCORES
= ZCOUNT hz ( +inf
= ZCOUNT hz "" 1
= ZRANGEBYSCORE hz " 1" 20
= ZRANGEBYSCORE hz "  " 20
= ZRANGEBYSCORE hz 0x1 0x10
= ZRANGEBYSCORE hz -1e400 1e400
= ZRANGEBYSCORE hz (0x1p-3 inf
= ZINCRBY hz 0x1 a
= ZUNION 1 hz WEIGHTS 0x2 WITHSCORES
= ZRANGEBYSCORE hz nan 1
= ZRANGEBYSCORE hz 1x 2
= ZADD na 1 x
= ZADD nb inf x
= ZINTER 2 na nb WEIGHTS 1 0 WITHSCORES
= ZINTER 2 na nb WEIGHTS 1 0 AGGREGATE MIN WITHSCORES
= ZINTER 2 na nb WEIGHTS 1 0 AGGREGATE MAX WITHSCORES
= ZINTER 2 nb na WEIGHTS 0 1 WITHSCORES
= ZUNION 2 na nb WEIGHTS 1 0 WITHSCORES
= ZINTERSTORE zd 2 na nb WEIGHTS 1 0
= ZRANGE zd 0 -1 WITHSCORES
= ZINCRBY zm -0 m
= ZADD zm INCR -0 n
= ZSCORE zm m
= ZUNION 1 zm WEIGHTS -1 WITHSCORES
= ZRANGE zm 0 -1 WITHSCORES
= ZRANDMEMBER nokey -99999999999
= SRANDMEMBER nokey -99999999999
= HRANDFIELD nokey -99999999999
= ZRANDMEMBER str -99999999999
^ COMMAND INFO zunion
^ COMMAND INFO zunionstore
^ COMMAND INFO zinterstore
^ COMMAND INFO zdiffstore
^ COMMAND INFO zinter
^ COMMAND INFO zdiff
^ COMMAND INFO zintercard
^ COMMAND INFO zrangestore
^ COMMAND INFO zrandmember
^ COMMAND INFO zlexcount
^ COMMAND INFO zrangebylex
^ COMMAND INFO zrevrangebylex
^ COMMAND INFO zremrangebylex
^ COMMAND INFO lmpop
^ COMMAND INFO zmpop
^ COMMAND INFO sintercard
^ COMMAND INFO blmpop
^ COMMAND INFO bzmpop
^ COMMAND INFO smove
= FLUSHALL"#;

#[test]
fn sorted_set_combinations_and_lexicographic_ranges_answer_as_redis_server_does() {
    same_answers_line_by_line(ZSET_OPS_SCRIPT);
}

/// Databases: SELECT, per-database keys, FLUSHDB, SWAPDB, FLUSHALL, one
/// connection through it all (the keyspace section of INFO included, while
/// no key expires: Redis's avg_ttl there is its own estimate).
const DATABASE_SCRIPT: &str = "FLUSHALL
SET k zero
SELECT 1
GET k
SET k one
HSET h f v
DBSIZE
KEYS k*
SELECT 0
GET k
DBSIZE
SELECT 15
SET k fifteen
SELECT 16
SELECT -1
SELECT x
INFO keyspace
SWAPDB 0 15
GET k
SELECT 0
GET k
SWAPDB 0 16
SWAPDB x 1
SWAPDB 1 x
SELECT 1
EXPIRE k 1000
TTL k
FLUSHDB
DBSIZE
SELECT 0
DBSIZE
MULTI
SELECT 1
SET inside 1
SELECT 0
EXEC
SELECT 1
GET inside
FLUSHALL
SELECT 15
DBSIZE
INFO keyspace
CONFIG GET databases
SET m value
EXPIRE m 500
RPUSH ml one
HSET mh f v
MOVE m 2
MOVE m 2
MOVE nokey 2
MOVE ml 0
MOVE ml 16
MOVE ml x
MOVE ml 3
SELECT 2
GET m
TTL m
SET clash here
SELECT 0
SET clash there
MOVE clash 2
GET clash
COPY mh mh2
HGETALL mh2
COPY mh mh2
COPY mh mh2 REPLACE
COPY mh mh
COPY mh mh DB 4
COPY mh mh DB 99
COPY mh mh DB x
COPY mh mh BOGUS
COPY nokey k2
SELECT 4
HGET mh f
TYPE mh
SELECT 3
LRANGE ml 0 -1
TYPE ml
COPY ml ml9 DB 0
SELECT 0
LRANGE ml9 0 -1
FLUSHALL
";

#[test]
fn databases_answer_as_redis_server_does() {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    same_answers(redis.port, ours.addr.port(), DATABASE_SCRIPT, 40);
    ours.stop();
}

/// Transactions past maxmemory (noeviction): queuing is refused, and EXEC
/// then aborts; every answer redis-server's.
const OOM_TRANSACTION_SCRIPT: &str = "FLUSHALL
SET a 1
CONFIG SET maxmemory 1
MULTI
SET b 2
GET a
EXEC
EXEC
MULTI
GET a
DISCARD
GET a
SET c 3
CONFIG SET maxmemory 0
MULTI
SET b 2
EXEC
";

#[test]
fn transactions_past_maxmemory_answer_as_redis_server_does() {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let theirs = redis_cli(redis.port, OOM_TRANSACTION_SCRIPT);
    let mine = redis_cli(ours.addr.port(), OOM_TRANSACTION_SCRIPT);
    assert!(theirs.iter().any(|l| l.starts_with("OOM")), "{theirs:?}");
    assert_eq!(mine, theirs, "(ours, then redis-server's)");
    ours.stop();
}

#[test]
fn lists_and_strings_answer_as_redis_server_does() {
    same_answers_line_by_line(LIST_AND_STRING_SCRIPT);
}

/// A cache under maxmemory with `allkeys-lru`: redis-benchmark writes
/// ten times what fits; neither server refuses a write, both evict, and
/// ours stays within its limit (Redis counts its allocator's total, so the
/// two limits hold different amounts of data).
#[test]
fn an_lru_cache_past_maxmemory_evicts_instead_of_refusing_as_redis_server_does() {
    if find("redis-server").is_none() || find("redis-benchmark").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    for port in [redis.port, ours.addr.port()] {
        let set = redis_cli(port, "CONFIG SET maxmemory 8mb\nCONFIG SET maxmemory-policy allkeys-lru\n");
        assert_eq!(set, ["OK", "OK"], "port {port}");
        let out = Command::new("redis-benchmark")
            .args(["-p", &port.to_string(), "-t", "set", "-n", "80000", "-r", "1000000", "-d", "1000", "-c", "4", "-q"])
            .output()
            .expect("redis-benchmark");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !text.to_ascii_lowercase().contains("error"), "port {port}: {text}");
        let info = redis_cli(port, "INFO\nDBSIZE\n");
        let field = |name: &str| -> u64 {
            info.iter().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
        };
        assert!(field("evicted_keys:") > 10_000, "port {port} evicted {}", field("evicted_keys:"));
        let keys: u64 = info.last().and_then(|l| l.parse().ok()).unwrap_or(u64::MAX);
        assert!(keys < 20_000, "port {port} kept {keys} keys of ~1000 B in 8 MB");
        if port == ours.addr.port() {
            assert!(field("used_memory:") <= 8 << 20, "within maxmemory: {}", field("used_memory:"));
        }
    }
    ours.stop();
}

/// One whole RESP reply from `r`, written out (`nil` and `nil-array` for
/// the nulls, arrays as `[a, b]`).
fn read_reply(r: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1);
    match kind {
        "$" if rest == "-1" => "nil".into(),
        "$" => {
            let mut data = vec![0u8; rest.parse::<usize>().unwrap() + 2];
            r.read_exact(&mut data).unwrap();
            String::from_utf8_lossy(&data[..data.len() - 2]).into_owned()
        }
        "*" if rest == "-1" => "nil-array".into(),
        "*" => {
            let items: Vec<String> = (0..rest.parse::<usize>().unwrap()).map(|_| read_reply(r)).collect();
            format!("[{}]", items.join(", "))
        }
        _ => line.to_owned(),
    }
}

/// WATCH with a second connection changing keys in between: every answer
/// of both connections is redis-server's, across the ways a key changes
/// (a write, EXPIRE, expiry, FLUSHALL) and the ways it does not (a write
/// that changes nothing, another key).
#[test]
fn watch_aborts_exec_when_another_connection_changes_a_key_as_redis_server_does() {
    if find("redis-server").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    // (connection, command); `sleep` waits for a key to expire.
    let steps: &[(usize, &str)] = &[
        (0, "FLUSHALL"),
        (0, "SET k 1"),
        // Changed by the other connection: EXEC runs nothing.
        (0, "WATCH k"),
        (1, "SET k 2"),
        (0, "MULTI"),
        (0, "SET k 3"),
        (0, "EXEC"),
        (0, "GET k"),
        // The watch went with EXEC: this one runs.
        (0, "MULTI"),
        (0, "INCR k"),
        (0, "EXEC"),
        // Unchanged (a write that changes nothing, another key): runs.
        (0, "WATCH k nokey"),
        (1, "SET k 9 NX"),
        (1, "DEL nokey"),
        (1, "SET other 1"),
        (0, "MULTI"),
        (0, "GET k"),
        (0, "EXEC"),
        // EXPIRE changes it; so does FLUSHALL; UNWATCH forgets.
        (0, "WATCH k"),
        (1, "EXPIRE k 100"),
        (0, "MULTI"),
        (0, "EXEC"),
        (0, "WATCH other"),
        (1, "FLUSHALL"),
        (0, "MULTI"),
        (0, "EXEC"),
        (0, "SET k 1"),
        (0, "WATCH k"),
        (1, "SET k 5"),
        (0, "UNWATCH"),
        (0, "MULTI"),
        (0, "GET k"),
        (0, "EXEC"),
        // A key that expires while watched.
        (0, "SET t 1 PX 50"),
        (0, "WATCH t"),
        (0, "sleep"),
        (0, "MULTI"),
        (0, "EXEC"),
        // Deleted and written by a list push, a hash and a set.
        (0, "WATCH l h s"),
        (1, "RPUSH l a"),
        (0, "MULTI"),
        (0, "EXEC"),
        (0, "WATCH h"),
        (1, "HSET h f v"),
        (0, "MULTI"),
        (0, "EXEC"),
        (0, "WATCH s"),
        (1, "SADD s a"),
        (1, "SADD s a"),
        (0, "MULTI"),
        (0, "EXEC"),
        (0, "WATCH s"),
        (1, "SADD s a"),
        (0, "MULTI"),
        (0, "EXEC"),
        // WATCH inside MULTI, DISCARD forgetting the watch.
        (0, "MULTI"),
        (0, "WATCH k"),
        (0, "GET k"),
        (0, "EXEC"),
        (0, "WATCH k"),
        (0, "MULTI"),
        (0, "DISCARD"),
        (1, "SET k 6"),
        (0, "MULTI"),
        (0, "GET k"),
        (0, "EXEC"),
        (0, "WATCH"),
        // An LREM that removes nothing changes nothing; FLUSHALL changes
        // only watched keys that existed.
        (0, "RPUSH q a"),
        (0, "WATCH q"),
        (1, "LREM q 0 zz"),
        (0, "MULTI"),
        (0, "EXEC"),
        (0, "WATCH nothere"),
        (1, "FLUSHALL"),
        (0, "MULTI"),
        (0, "EXEC"),
        (0, "SET sw 1"),
        (0, "WATCH sw"),
        (1, "SWAPDB 0 1"),
        (0, "MULTI"),
        (0, "EXEC"),
        (1, "SWAPDB 0 1"),
        // A password set later: connections already open stay in.
        (1, "CONFIG SET requirepass pw"),
        (1, "PING"),
        (0, "PING"),
    ];
    let theirs = same_steps(&redis, &ours, 2, steps);
    assert!(theirs.iter().filter(|l| l.ends_with("EXEC: nil-array")).count() >= 6, "{theirs:#?}");
    ours.stop();
}

/// Publish/subscribe over four connections, step by step, every reply and
/// every message as redis-server gives them: subscribed mode, patterns,
/// PUBSUB's counts, unsubscribing, and a subscriber that goes away.
#[test]
fn pubsub_delivers_as_redis_server_does() {
    if find("redis-server").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    // (connection, command or "" to read what arrives, replies to read).
    let steps: &[(usize, &str, usize)] = &[
        (2, "FLUSHALL", 1),
        (0, "SUBSCRIBE news sports", 2),
        (2, "PUBLISH news hello", 1),
        (0, "", 1),
        (0, "GET k", 1),
        (0, "PING", 1),
        (0, "PING there", 1),
        (1, "PSUBSCRIBE n* x?z", 2),
        (2, "PUBLISH news second", 1),
        (0, "", 1),
        (1, "", 1),
        (2, "PUBLISH xyz third", 1),
        (1, "", 1),
        (2, "PUBLISH nobody fourth", 1),
        (1, "", 1),
        (2, "PUBLISH empty fifth", 1),
        (2, "PUBSUB NUMSUB news sports none", 1),
        (2, "PUBSUB NUMPAT", 1),
        (2, "PUBSUB CHANNELS s*", 1),
        (2, "PUBSUB NOSUCH", 1),
        (0, "SUBSCRIBE news", 1),
        (0, "UNSUBSCRIBE news", 1),
        (0, "UNSUBSCRIBE", 1),
        (0, "GET k", 1),
        (0, "UNSUBSCRIBE", 1),
        (1, "PUNSUBSCRIBE x?z", 1),
        (1, "PUNSUBSCRIBE", 1),
        (1, "PUNSUBSCRIBE", 1),
        (3, "SUBSCRIBE gone", 1),
        (2, "PUBSUB NUMSUB gone", 1),
        (3, "close", 0),
        (2, "PUBSUB NUMSUB gone", 1),
        (2, "PUBLISH gone lost", 1),
        (2, "PUBLISH", 1),
    ];
    let run = |addr: SocketAddr| -> Vec<String> {
        let mut conns: Vec<Option<TcpStream>> = (0..4).map(|_| Some(connect(addr))).collect();
        let mut readers: Vec<BufReader<TcpStream>> =
            conns.iter().map(|c| BufReader::new(c.as_ref().unwrap().try_clone().unwrap())).collect();
        let mut out = Vec::new();
        for &(c, step, replies) in steps {
            if step == "close" {
                let _ = conns[c].take().unwrap().shutdown(std::net::Shutdown::Both);
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            if !step.is_empty() {
                let args: Vec<&[u8]> = step.split(' ').map(str::as_bytes).collect();
                conns[c].as_ref().unwrap().write_all(&command(&args)).unwrap();
            }
            for _ in 0..replies {
                out.push(format!("{c} {step}: {}", read_reply(&mut readers[c])));
            }
        }
        out
    };
    let theirs = run(SocketAddr::from(([127, 0, 0, 1], redis.port)));
    let mine = run(ours.addr);
    for (t, m) in theirs.iter().zip(&mine) {
        assert_eq!(m, t, "(ours, then redis-server's)");
    }
    assert_eq!(mine.len(), theirs.len());
    assert!(theirs.iter().any(|l| l.contains("[pmessage, n*, news, second]")), "{theirs:#?}");
    ours.stop();
}

/// A subscriber that reads nothing is disconnected once 32 MiB wait for
/// it (Redis's pubsub output limit), and the publisher goes on.
#[test]
fn a_subscriber_that_reads_nothing_is_disconnected_past_the_limit() {
    let ours = Server::start(ServeOptions::default());
    let sub = connect(ours.addr);
    (&sub).write_all(&command(&[b"SUBSCRIBE", b"flood"])).unwrap();
    let mut sub_reader = BufReader::new(sub.try_clone().unwrap());
    assert_eq!(read_reply(&mut sub_reader), "[subscribe, flood, :1]");
    let publisher = connect(ours.addr);
    let mut pub_reader = BufReader::new(publisher.try_clone().unwrap());
    let message = vec![b'm'; 512 << 10];
    let mut receivers = Vec::new();
    for _ in 0..200 {
        (&publisher).write_all(&command(&[b"PUBLISH", b"flood", &message])).unwrap();
        receivers.push(read_reply(&mut pub_reader));
        if receivers.last().is_some_and(|r| r == ":0") {
            break;
        }
    }
    assert_eq!(receivers.first().map(String::as_str), Some(":1"));
    assert_eq!(receivers.last().map(String::as_str), Some(":0"), "disconnected before 100 MB: {}", receivers.len());
    assert!(receivers.len() < 120, "about 32 MiB (64 messages) and the socket's buffers: {}", receivers.len());
    (&publisher).write_all(&command(&[b"PUBSUB", b"NUMSUB", b"flood"])).unwrap();
    assert_eq!(read_reply(&mut pub_reader), "[flood, :0]");
    let stats = ours.stop();
    assert!(stats.reply_dropped >= 1, "{stats:?}");
}

/// `redis-cli --hotkeys` (OBJECT FREQ under an LFU policy) finds the key
/// read most on both servers, `--memkeys` (MEMORY USAGE) sizes every key,
/// and OBJECT ENCODING names what Redis 7.0 would use.
#[test]
fn redis_cli_hotkeys_memkeys_and_object_encoding_work_as_on_redis_server() {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let mut fill = String::from("FLUSHALL\nCONFIG SET maxmemory-policy allkeys-lfu\n");
    for i in 0..20 {
        fill.push_str(&format!("SET k{i} v\n"));
    }
    fill.push_str(&"GET k3\n".repeat(300));
    let encodings = format!(
        "SET int 12345\nSET neg -7\nSET lead 0123\nSET short hello\nSET long {}\nRPUSH l a\nHSET h f v\nHSET bigh f {}\n\
         SADD si 1 2 3\nSADD ss a\nZADD z 1 a\nZADD bigz 1 {}\nOBJECT ENCODING int\nOBJECT ENCODING neg\nOBJECT ENCODING lead\n\
         OBJECT ENCODING short\nOBJECT ENCODING long\nOBJECT ENCODING l\nOBJECT ENCODING h\nOBJECT ENCODING bigh\n\
         OBJECT ENCODING si\nOBJECT ENCODING ss\nOBJECT ENCODING z\nOBJECT ENCODING bigz\nOBJECT ENCODING nokey\n\
         OBJECT REFCOUNT short\nOBJECT ENCODING\nOBJECT NOSUCH k\nMEMORY USAGE nokey\nMEMORY NOSUCH\nMEMORY USAGE k1 SAMPLES x\n",
        "x".repeat(50),
        "y".repeat(70),
        "m".repeat(70)
    );
    let cli = |port: u16, args: &[&str]| {
        let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let mut answers = Vec::new();
    for port in [redis.port, ours.addr.port()] {
        redis_cli(port, &fill);
        let hot = cli(port, &["--hotkeys"]);
        let first = hot.lines().find(|l| l.starts_with("hot key found")).unwrap_or_default().to_owned();
        assert!(first.ends_with("keyname: \"k3\""), "port {port}: {hot}");
        let counter: u32 = first.split("counter: ").nth(1).and_then(|r| r.split('\t').next()).unwrap().parse().unwrap();
        assert!(counter >= 8, "port {port}: {first}");
        let mem = cli(port, &["--memkeys"]);
        assert!(mem.contains("20 strings with") && !mem.to_ascii_lowercase().contains("error"), "port {port}: {mem}");
        answers.push(redis_cli(port, &encodings));
    }
    assert_eq!(answers[1], answers[0], "OBJECT and MEMORY answers (ours, then redis-server's)");
    ours.stop();
}

/// A password (`CONFIG SET requirepass`, as `cf kv-server --requirepass`
/// sets it): each new connection must AUTH before anything else, and
/// every answer on the way is redis-server's (the HELLO that succeeds is
/// left out: its contents describe the server).
#[test]
fn auth_and_requirepass_answer_as_redis_server_does() {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let scripts = [
        "AUTH x\nAUTH default x\nAUTH nobody x\nAUTH\nAUTH a b c\nCONFIG SET requirepass s3cret\nPING\nCONFIG GET requirepass\n",
        // A new connection, which has not given the password.
        "PING\nSET k v\nNOSUCHCMD\nGET\nMULTI\nHELLO 2\nHELLO 2 AUTH default wrong\nAUTH wrong\nAUTH nobody s3cret\n\
         AUTH s3cret\nPING\nSET k v\nGET k\nAUTH default s3cret\nAUTH default wrong\nGET k\n",
        "HELLO 2 AUTH default s3cret SETNAME named\nCLIENT GETNAME\nCONFIG SET requirepass \"\"\n",
        "PING\nGET k\n",
    ];
    for (n, script) in scripts.iter().enumerate() {
        let theirs = redis_cli(redis.port, script);
        let mine = redis_cli(ours.addr.port(), script);
        // The successful HELLO's reply (a map naming the server) is skipped.
        let skip = if n == 2 { theirs.len() - 2 } else { 0 };
        assert!(!theirs.is_empty(), "redis-server answered nothing to script {n}");
        assert_eq!(mine.len(), theirs.len(), "script {n}: ours {mine:?}, redis-server's {theirs:?}");
        assert_eq!(&mine[skip..], &theirs[skip..], "script {n} (ours, then redis-server's)");
    }
    ours.stop();
}

/// `redis-cli --scan` lists the keys redis-server lists (in its own
/// order), and `redis-cli --bigkeys` runs through and finds the biggest
/// list, hash, set and sorted set (the biggest string is one of several of one length, either
/// server may name any).
#[test]
fn redis_cli_scan_and_bigkeys_see_what_they_see_on_redis_server() {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let mut fill = String::new();
    for i in 0..3000 {
        fill.push_str(&format!("SET user:{i} {}\n", "x".repeat(i % 50 + 1)));
    }
    fill.push_str(
        "RPUSH biglist a b c d e f g\nSET other 1\nHSET bighash a 1 b 2 c 3\nSADD bigset x y\nZADD bigzset 1 a 2 b\n",
    );
    for port in [redis.port, ours.addr.port()] {
        redis_cli(port, &fill);
    }
    let scan = |port: u16, args: &[&str]| {
        let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().expect("redis-cli");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let sorted = |text: String| {
        let mut v: Vec<String> = text.lines().map(str::to_owned).collect();
        v.sort();
        v
    };
    let theirs = sorted(scan(redis.port, &["--scan", "--pattern", "user:1*"]));
    let mine = sorted(scan(ours.addr.port(), &["--scan", "--pattern", "user:1*"]));
    assert_eq!(theirs.len(), 1111);
    assert_eq!(mine, theirs);
    let big = |port: u16| {
        let text = scan(port, &["--bigkeys"]);
        assert!(!text.contains("error"), "{text}");
        text.lines()
            .filter(|l| l.starts_with("Biggest"))
            .map(|l| l.split('\'').nth(1).unwrap_or("").trim_matches('"').to_owned())
            .collect::<Vec<_>>()
    };
    let (theirs, mine) = (big(redis.port), big(ours.addr.port()));
    for big in [&theirs, &mine] {
        for name in ["biglist", "bighash", "bigset", "bigzset"] {
            assert!(big.contains(&name.to_owned()), "{name} in {big:?}");
        }
    }
    assert_eq!(mine.len(), theirs.len(), "ours {mine:?}, redis-server's {theirs:?}");
    ours.stop();
}

#[test]
fn a_client_past_maxclients_hears_what_redis_server_says() {
    if find("redis-server").is_none() || find("redis-cli").is_none() {
        return;
    }
    let redis = RedisServer::start_with(&["--maxclients", "1"]);
    let ours = Server::start_with(ServeOptions::default(), |c| TcpConfig {
        max_connections: 1,
        refusal: resp::MAX_CLIENTS_REACHED.to_vec(),
        ..c
    });
    let mut answers = Vec::new();
    for port in [redis.port, ours.addr.port()] {
        // The one client allowed, served before and after the refused one.
        let mut first = connect(SocketAddr::from(([127, 0, 0, 1], port)));
        first.write_all(&command(&[b"PING"])).unwrap();
        assert_eq!(read_n(&mut first, 7), b"+PONG\r\n");
        answers.push(redis_cli(port, "PING\n"));
        first.write_all(&command(&[b"PING"])).unwrap();
        assert_eq!(read_n(&mut first, 7), b"+PONG\r\n", "port {port}: the client in the table is still served");
    }
    assert!(
        answers[0].iter().any(|l| l.contains("max number of clients reached")),
        "redis-server said {:?}",
        answers[0]
    );
    assert_eq!(answers[1], answers[0], "ours, then redis-server's");
    ours.stop();
}

#[test]
fn redis_cli_stat_shows_the_keys_and_clients() {
    if find("redis-cli").is_none() {
        return;
    }
    let ours = Server::start(ServeOptions::default());
    let port = ours.addr.port().to_string();
    redis_cli(ours.addr.port(), "SET a 1\nSET b 2\nRPUSH c x y z\n");
    let out = Command::new("timeout")
        .args(["1.5", "stdbuf", "-oL", "redis-cli", "-p", &port, "--stat", "-i", "0.2"])
        .output()
        .expect("redis-cli --stat");
    let text = String::from_utf8_lossy(&out.stdout);
    // Columns: keys, mem, clients, blocked, requests, connections (line
    // buffered: `timeout` ends redis-cli, which would lose a full buffer).
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.first().is_some_and(|k| k.parse::<u64>().is_ok()))
        .collect();
    assert!(rows.len() >= 3, "redis-cli --stat printed {text:?}");
    for r in &rows {
        assert_eq!(r[0], "3", "keys: {text}");
        assert!(r[1].ends_with(['B', 'K', 'M', 'G']), "memory is human-readable: {text}");
        assert!(r[2].parse::<u64>().is_ok_and(|c| c >= 1), "clients: {text}");
    }
    ours.stop();
}

#[test]
fn redis_benchmark_runs_against_it_without_errors() {
    if find("redis-benchmark").is_none() {
        return;
    }
    let ours = Server::start(ServeOptions::default());
    let port = ours.addr.port().to_string();
    let run = |extra: &[&str]| {
        let out = Command::new("redis-benchmark")
            .args(["-p", &port, "-n", "2000", "-c", "4", "-q"])
            .args(extra)
            .output()
            .expect("redis-benchmark");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{text}");
        assert!(!text.to_ascii_lowercase().contains("error"), "{text}");
        text
    };
    let text = run(&["-t", "get,set,mset,lrange_100,hset,sadd,spop,zadd,zpopmin", "-d", "1024", "-P", "4"]);
    // Progress lines end in \r, results in \n.
    for test in [
        "SET: ",
        "GET: ",
        "MSET (10 keys): ",
        "LRANGE_100 (first 100 elements): ",
        "HSET: ",
        "SADD: ",
        "SPOP: ",
        "ZADD: ",
        "ZPOPMIN: ",
    ] {
        let result =
            text.split(['\r', '\n']).any(|l| l.trim_start().starts_with(test) && l.contains("requests per second"));
        assert!(result, "no result for {test}: {text}");
    }
    let text = run(&["MGET", "key:__rand_int__", "key:__rand_int__"]);
    assert!(text.contains("requests per second"), "{text}");
    let stats = ours.stop();
    assert_eq!((stats.protocol_errors, stats.reply_dropped), (0, 0), "{stats:?}");
}

#[test]
fn one_store_answers_resp_and_the_cornflakes_format() {
    use cornflakes_kv::codec::cornflakes::{CornflakesClient, CornflakesServer};
    use cornflakes_kv::{ClientCodec, Op, Request, Status};
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        let raw = TcpConfig { framing: Framing::Raw, ..TcpConfig::loopback() };
        let mut dp = TcpDatapath::bind("127.0.0.1:0".parse().unwrap(), raw).unwrap();
        let pool = dp.pool().clone();
        let shared = TcpConfig { pool: Some(pool.clone()), ..TcpConfig::loopback() };
        let mut kv = TcpDatapath::bind("127.0.0.1:0".parse().unwrap(), shared).unwrap();
        tx.send((dp.local_addrs()[0], kv.local_addrs()[0])).unwrap();
        let mut db = RespDb::new(Store::new(pool.clone(), resp_limits()), DEFAULT_THRESHOLD);
        let codec = CornflakesServer::new(&pool, DEFAULT_THRESHOLD, true);
        resp::serve_with_kv(&mut dp, &mut kv, codec, &mut db, &ServeOptions::default(), |_, _| {
            !flag.load(Ordering::Relaxed)
        })
        .unwrap()
    });
    let (resp_addr, kv_addr) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let big = vec![b'r'; 3000];
    let mut c = connect(resp_addr);
    c.write_all(&command(&[b"SET", b"from-resp", &big])).unwrap();
    assert_eq!(read_n(&mut c, 5), b"+OK\r\n");

    let mut client = TcpDatapath::new(TcpConfig::loopback()).unwrap();
    let conn = client.connect(kv_addr).unwrap();
    let mut codec = CornflakesClient::new(client.pool());
    let mut call = |client: &mut TcpDatapath, id: u32, req: &Request<'_>| -> (Status, Vec<Vec<u8>>) {
        codec.send_request(client, conn, id, req).unwrap();
        client.flush().unwrap();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while client.recv_batch(&mut got, 1).unwrap() == 0 {
            assert!(Instant::now() < deadline, "no response");
            client.wait(Duration::from_millis(10)).unwrap();
        }
        assert_eq!(got[0].msg_id, id);
        let mut out = None;
        codec
            .read_response(&got[0].payload, &mut |s, vals| out = Some((s, vals.iter().map(|v| v.to_vec()).collect())))
            .unwrap();
        codec.end_batch();
        out.unwrap()
    };
    let get = Request {
        op: Op::Get as u32,
        keys: [&b"from-resp"[..]].into_iter().collect(),
        vals: Default::default(),
        index: 0,
    };
    assert_eq!(call(&mut client, 1, &get), (Status::Ok, vec![big.clone()]));
    let small = b"from the cornflakes format".to_vec();
    let put = Request {
        op: Op::Put as u32,
        keys: [&b"from-cf"[..]].into_iter().collect(),
        vals: [&small[..]].into_iter().collect(),
        index: 0,
    };
    assert_eq!(call(&mut client, 2, &put).0, Status::Ok);
    c.write_all(b"GET from-cf\r\nDBSIZE\r\n").unwrap();
    let mut want = bulk(&small);
    want.extend(b":2\r\n");
    assert_eq!(read_n(&mut c, want.len()), want);
    stop.store(true, Ordering::Relaxed);
    let (resp_stats, kv_stats) = thread.join().unwrap();
    assert_eq!((resp_stats.commands, kv_stats.handled), (3, 2));
}

/// Runs `steps` over `n` connections to `addr`, one step at a time, and
/// writes out what each connection hears. A step is `(connection, what)`:
/// a command (sent, its reply read); `> command` (sent, its reply not
/// read: it blocks); `<` (one reply read); `?` (whatever arrives within
/// 150 ms, or `nothing`); `a | b` (both sent in one write, both replies
/// read); `sleep`; `close`; `UNBLOCK c [how]` (CLIENT UNBLOCK with
/// connection c's id); `INFO-BLOCKED` (INFO's `blocked_clients` line);
/// `LIST [options]` and `INFO-ME` (CLIENT LIST and CLIENT INFO, each line
/// as [`client_fields`] keeps it); `KILL c [options]` (CLIENT KILL ID with
/// connection c's id), `KILL-ADDR c` (CLIENT KILL with its address);
/// `EOF` (whether the server has closed the connection).
fn run_steps(addr: SocketAddr, n: usize, steps: &[(usize, &str)]) -> Vec<String> {
    let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| Some(connect(addr))).collect();
    let mut readers: Vec<BufReader<TcpStream>> =
        conns.iter().map(|c| BufReader::new(c.as_ref().unwrap().try_clone().unwrap())).collect();
    let send = |s: &TcpStream, line: &str| {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let mut s = s;
        s.write_all(&command(&args)).unwrap();
    };
    let mut ids = Vec::new();
    for (c, r) in conns.iter().zip(readers.iter_mut()) {
        send(c.as_ref().unwrap(), "CLIENT ID");
        // A reply that never comes fails the test rather than hanging it.
        r.get_ref().set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ids.push(read_reply(r).trim_start_matches(':').to_owned());
    }
    let mut out = Vec::new();
    for &(c, step) in steps {
        let conn = conns[c].as_ref();
        let heard = match step {
            "sleep" => {
                std::thread::sleep(Duration::from_millis(150));
                continue;
            }
            "close" => {
                conns[c] = None;
                // The old reader's handle closes too.
                readers[c] = BufReader::new(connect(addr));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            "<" => read_reply(&mut readers[c]),
            // INFO commandstats without times, lines sorted (Redis lists
            // them in its table's order).
            "COMMANDSTATS" => {
                send(conn.unwrap(), "INFO commandstats");
                let text = read_reply(&mut readers[c]);
                let mut lines: Vec<String> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("cmdstat_"))
                    .map(|l| {
                        let (name, fields) = l.split_once(':').unwrap();
                        let kept: Vec<&str> = fields.split(',').filter(|f| !f.starts_with("usec")).collect();
                        format!("{name} {}", kept.join(","))
                    })
                    .collect();
                lines.sort();
                lines.join(" / ")
            }
            "ERRORSTATS" => {
                send(conn.unwrap(), "INFO errorstats");
                let errors = read_reply(&mut readers[c]);
                send(conn.unwrap(), "INFO stats");
                let stats = read_reply(&mut readers[c]);
                let total = stats.lines().find(|l| l.starts_with("total_error_replies:")).unwrap_or("none").to_owned();
                format!(
                    "{} / {total}",
                    errors.lines().filter(|l| l.starts_with("errorstat_")).collect::<Vec<_>>().join(" ")
                )
            }
            // SLOWLOG GET -1 without times; the client by connection.
            "SLOWLOG-GET" => {
                send(conn.unwrap(), "SLOWLOG GET -1");
                let r = &mut readers[c];
                let mut head = String::new();
                r.read_line(&mut head).unwrap();
                let n: usize = head.trim_end()[1..].parse().unwrap();
                let mut entries = Vec::new();
                for _ in 0..n {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    assert_eq!(line, "*6\r\n", "an entry has six fields");
                    let (id, at, took) = (read_reply(r), read_reply(r), read_reply(r));
                    assert!(at.starts_with(':') && took.starts_with(':'), "{at} {took}");
                    let (args, peer, name) = (read_reply(r), read_reply(r), read_reply(r));
                    let who = conns
                        .iter()
                        .position(|s| s.as_ref().is_some_and(|s| s.local_addr().unwrap().to_string() == peer))
                        .map_or(format!("? {peer}"), |i| format!("conn {i}"));
                    entries.push(format!("{id} {args} {who} '{name}'"));
                }
                entries.join(" / ")
            }
            "?" => {
                let r = &mut readers[c];
                r.get_ref().set_read_timeout(Some(Duration::from_millis(150))).unwrap();
                let heard = match r.fill_buf() {
                    Ok(b) if !b.is_empty() => None,
                    _ => Some("nothing".to_owned()),
                };
                r.get_ref().set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                heard.unwrap_or_else(|| read_reply(r))
            }
            _ if step.starts_with("LIST") || step == "INFO-ME" => {
                let sub = if step == "INFO-ME" { "CLIENT INFO".to_owned() } else { format!("CLIENT {step}") };
                send(conn.unwrap(), sub.trim_end());
                let text = read_reply(&mut readers[c]);
                let mut lines: Vec<String> = text.lines().map(|l| client_fields(l, &ids)).collect();
                lines.sort();
                lines.join(" / ")
            }
            _ if step.starts_with("KILL ") || step.starts_with("KILL-ADDR ") => {
                let mut words = step.split(' ').skip(1);
                let who: usize = words.next().unwrap().parse().unwrap();
                let rest: Vec<&str> = words.collect();
                let line = if step.starts_with("KILL-ADDR") {
                    let addr = conns[who].as_ref().unwrap().local_addr().unwrap();
                    format!("CLIENT KILL {addr}")
                } else {
                    format!("CLIENT KILL ID {} {}", ids[who], rest.join(" "))
                };
                send(conn.unwrap(), line.trim_end());
                read_reply(&mut readers[c])
            }
            "EOF" => {
                let r = &mut readers[c];
                r.get_ref().set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                match r.fill_buf() {
                    Ok([]) => "closed".to_owned(),
                    Ok(_) => format!("open, with {}", read_reply(r)),
                    Err(_) => "open".to_owned(),
                }
            }
            "INFO-BLOCKED" => {
                send(conn.unwrap(), "INFO clients");
                let info = read_reply(&mut readers[c]);
                info.lines().find(|l| l.starts_with("blocked_clients:")).unwrap_or("none").to_owned()
            }
            _ if step.starts_with("> ") => {
                send(conn.unwrap(), &step[2..]);
                // Let it reach the server and block before the next step.
                std::thread::sleep(Duration::from_millis(30));
                continue;
            }
            _ if step.starts_with("UNBLOCK ") => {
                let mut words = step.split(' ').skip(1);
                let who: usize = words.next().unwrap().parse().unwrap();
                let how = words.next().map(|h| format!(" {h}")).unwrap_or_default();
                send(conn.unwrap(), &format!("CLIENT UNBLOCK {}{how}", ids[who]));
                read_reply(&mut readers[c])
            }
            _ if step.contains(" | ") => {
                let parts: Vec<&str> = step.split(" | ").collect();
                let all: Vec<u8> =
                    parts.iter().flat_map(|p| command(&p.split(' ').map(str::as_bytes).collect::<Vec<_>>())).collect();
                conn.unwrap().write_all(&all).unwrap();
                let replies: Vec<String> = parts.iter().map(|_| read_reply(&mut readers[c])).collect();
                replies.join(" ; ")
            }
            _ => {
                send(conn.unwrap(), step);
                read_reply(&mut readers[c])
            }
        };
        out.push(format!("{c} {step}: {heard}"));
    }
    out
}

/// Runs `steps` over `n` connections to redis-server and to ours and
/// asserts that every connection heard the same; redis-server's transcript.
fn same_steps(redis: &RedisServer, ours: &Server, n: usize, steps: &[(usize, &str)]) -> Vec<String> {
    let theirs = run_steps(SocketAddr::from(([127, 0, 0, 1], redis.port)), n, steps);
    let mine = run_steps(ours.addr, n, steps);
    for (m, t) in mine.iter().zip(&theirs) {
        assert_eq!(m, t, "(ours, then redis-server's)");
    }
    assert_eq!(mine.len(), theirs.len());
    theirs
}

/// A CLIENT LIST or CLIENT INFO line with what two servers can share: the
/// connection (by its place in `ids`), name, flags, database,
/// subscriptions, MULTI's count, last command, user, protocol, and the
/// names of all fields in order (addresses, ages and memory left out).
fn client_fields(line: &str, ids: &[String]) -> String {
    let pairs: Vec<(&str, &str)> = line.split(' ').filter_map(|kv| kv.split_once('=')).collect();
    let names: Vec<&str> = pairs.iter().map(|&(k, _)| k).collect();
    let who = pairs
        .iter()
        .find(|&&(k, _)| k == "id")
        .and_then(|&(_, v)| ids.iter().position(|i| i == v))
        .map_or("?".to_owned(), |i| i.to_string());
    const SHARED: [&str; 10] = ["name", "flags", "db", "sub", "psub", "ssub", "multi", "cmd", "user", "resp"];
    let kept: Vec<String> = pairs.iter().filter(|(k, _)| SHARED.contains(k)).map(|(k, v)| format!("{k}={v}")).collect();
    format!("conn {who}: {} [{}]", kept.join(" "), names.join(","))
}

/// CLIENT LIST, CLIENT INFO, CLIENT KILL (each form and filter) and RESET
/// over five connections, every answer (but addresses, ages and memory) as
/// redis-server's: names, databases, subscriptions, MULTI and blocked
/// clients listed; killed connections closed (a blocked one no longer
/// waits); a client that kills itself hears its answer first.
#[test]
fn client_list_kill_and_reset_answer_as_redis_server_does() {
    if find("redis-server").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let steps: &[(usize, &str)] = &[
        (0, "FLUSHALL"),
        (1, "CLIENT SETNAME worker"),
        (1, "SELECT 3"),
        (2, "SUBSCRIBE news"),
        (2, "PSUBSCRIBE n*"),
        (3, "MULTI"),
        (3, "SET a b"),
        (4, "> BLPOP q 0"),
        (0, "LIST"),
        (1, "INFO-ME"),
        (0, "LIST TYPE pubsub"),
        (0, "LIST TYPE normal"),
        (0, "LIST TYPE master"),
        (0, "KILL 1"),
        (1, "EOF"),
        (0, "KILL 0"),
        (0, "KILL-ADDR 3"),
        (3, "EOF"),
        (0, "CLIENT KILL TYPE pubsub"),
        (2, "EOF"),
        (0, "LIST"),
        (0, "KILL 4"),
        (4, "EOF"),
        (0, "RPUSH q x"),
        (0, "INFO-BLOCKED"),
        (0, "LIST"),
        // RESET: transaction, name, database and subscriptions go.
        (0, "CLIENT SETNAME me"),
        (0, "SELECT 2"),
        (0, "SET k v"),
        (0, "MULTI"),
        (0, "SET a b"),
        (0, "RESET"),
        (0, "EXEC"),
        (0, "CLIENT GETNAME"),
        (0, "GET k"),
        (0, "SUBSCRIBE c"),
        (0, "RESET"),
        (0, "PING"),
        (0, "INFO-ME"),
        // One that kills itself hears the answer, then is closed.
        (0, "KILL 0 SKIPME no"),
        (0, "EOF"),
    ];
    same_steps(&redis, &ours, 5, steps);
    let stats = ours.stop();
    assert_eq!(stats.killed, 4, "{stats:?}");
}

/// SLOWLOG (every command logged at a threshold of 0, passwords redacted,
/// long arguments cut, its length bound), INFO commandstats (calls,
/// rejected and failed calls, by subcommand for containers, a blocked
/// command counted when served, EXEC's commands each on their own),
/// errorstats with total_error_replies, CONFIG RESETSTAT and the settings:
/// every answer redis-server's, times and addresses left out.
#[test]
fn slowlog_and_command_stats_answer_as_redis_server_does() {
    if find("redis-server").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let many = format!("RPUSH l {}", (0..40).map(|i| i.to_string()).collect::<Vec<_>>().join(" "));
    let long = format!("SET big {}", "x".repeat(200));
    let steps: &[(usize, &str)] = &[
        (0, "FLUSHALL"),
        (0, "CONFIG SET slowlog-log-slower-than 0"),
        (0, "SLOWLOG RESET"),
        (0, "CONFIG RESETSTAT"),
        (1, "CLIENT SETNAME worker"),
        (1, "SET a 1"),
        (1, "LPUSH a x"),
        (1, "GET"),
        (1, "NOSUCH cmd"),
        (1, "AUTH secret"),
        (1, "AUTH user secret"),
        (1, "CLIENT NOSUCH"),
        (1, "CONFIG GET maxmemory"),
        (0, "MULTI"),
        (0, "INCR a"),
        (0, "LPUSH a y"),
        (0, "GET"),
        (0, "EXEC"),
        (0, "MULTI"),
        (0, "INCR a"),
        (0, "LPUSH a y"),
        (0, "EXEC"),
        (0, &many),
        (0, &long),
        (1, "> BLPOP q 0"),
        (0, "RPUSH q v"),
        (1, "<"),
        (0, "SLOWLOG-GET"),
        (0, "SLOWLOG LEN"),
        (0, "COMMANDSTATS"),
        (0, "ERRORSTATS"),
        (0, "CONFIG GET slowlog-max-len"),
        (0, "CONFIG GET slowlog-log-slower-than"),
        (0, "CONFIG SET slowlog-max-len 2"),
        (0, "SLOWLOG LEN"),
        (0, "SLOWLOG GET -2"),
        (0, "SLOWLOG GET x"),
        (0, "SLOWLOG GET 1 2"),
        (0, "SLOWLOG LEN x"),
        (0, "SLOWLOG FOO"),
        (0, "SLOWLOG HELP"),
        (0, "CONFIG SET slowlog-log-slower-than -5"),
        (0, "CONFIG SET slowlog-max-len -1"),
        (0, "CONFIG SET slowlog-log-slower-than -1"),
        (0, "SLOWLOG RESET"),
        (0, "PING"),
        (0, "SLOWLOG LEN"),
        (0, "CONFIG RESETSTAT"),
        (0, "CONFIG RESETSTAT x"),
        (0, "ERRORSTATS"),
        (0, "COMMANDSTATS"),
    ];
    same_steps(&redis, &ours, 2, steps);
}

#[test]
fn client_errors_answer_as_redis_server_does() {
    same_answers_line_by_line(
        "= CLIENT KILL 1.2.3.4:5
= CLIENT KILL ID 0
= CLIENT KILL ID x
= CLIENT KILL TYPE foo
= CLIENT KILL USER bob
= CLIENT KILL SKIPME maybe
= CLIENT KILL ID 99999
= CLIENT KILL ID 5 TYPE
= CLIENT KILL TYPE master
= CLIENT KILL ADDR 1.2.3.4:5
= CLIENT KILL LADDR 1.2.3.4:5
= CLIENT KILL USER default SKIPME yes
= CLIENT KILL
= CLIENT LIST TYPE foo
= CLIENT LIST ID x
= CLIENT LIST ID 99999
= CLIENT LIST foo
= CLIENT LIST TYPE normal extra
= CLIENT LIST TYPE pubsub
= CLIENT INFO x
= CLIENT HELP x
= RESET x
= RESET",
    );
}

/// Blocking pops over four connections, every answer as redis-server's:
/// who is served first and from which key, a push and a pop pipelined past
/// a waiter, input that waits behind a blocked command, timeouts, MULTI,
/// CLIENT UNBLOCK, a client that leaves while blocked, SWAPDB, BLMOVE's
/// wrong-kind destination, and the argument errors.
#[test]
fn blocking_pops_answer_as_redis_server_does() {
    if find("redis-server").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let steps: &[(usize, &str)] = &[
        (0, "FLUSHALL"),
        // Served in the order they blocked, each from the key made ready.
        (1, "> BLPOP k1 k2 0"),
        (2, "> BLPOP k1 0"),
        (0, "INFO-BLOCKED"),
        (0, "MULTI | RPUSH k2 x | RPUSH k1 y | EXEC"),
        (1, "<"),
        (2, "<"),
        (0, "INFO-BLOCKED"),
        // A waiter is served right after the push, before the pop.
        (1, "> BRPOP q 0"),
        (0, "RPUSH q 1 | LPOP q"),
        (1, "<"),
        // Input behind a blocked command waits, then runs in order.
        (1, "> BLPOP w 0"),
        (1, "> PING"),
        (1, "?"),
        (0, "RPUSH w z"),
        (1, "<"),
        (1, "<"),
        // Nothing arrives: the null array, for every command.
        (1, "BLPOP none 0.05"),
        (1, "BRPOP none 0.05"),
        (1, "BRPOPLPUSH none d 0.05"),
        (1, "BLMOVE none d LEFT LEFT 0.05"),
        (1, "BLMPOP 0.05 2 none none2 LEFT"),
        (1, "BZPOPMIN none 0.05"),
        // Something there: served at once; the first key that holds one.
        (0, "RPUSH a 1 2 3"),
        (1, "BLPOP none a 0"),
        (1, "BRPOP a 0"),
        (1, "BLMPOP 0 1 a RIGHT COUNT 5"),
        (1, "EXISTS a"),
        (0, "RPUSH rot a b"),
        (0, "BRPOPLPUSH rot rot 0"),
        (0, "LRANGE rot 0 -1"),
        (0, "BLMOVE rot dst RIGHT LEFT 0"),
        (0, "LRANGE dst 0 -1"),
        // Inside MULTI nothing waits.
        (0, "MULTI | BLPOP none 0 | BLMOVE none d LEFT LEFT 0 | EXEC"),
        // A string is not a list: the waiter waits on; a list serves it.
        (1, "> BLPOP t 0"),
        (0, "SET t str"),
        (1, "?"),
        (0, "DEL t | RPUSH t 1"),
        (1, "<"),
        // BLMOVE to a key of another kind: the error, the element stays.
        (0, "SET str v"),
        (1, "> BLMOVE src str LEFT RIGHT 0"),
        (0, "RPUSH src e"),
        (1, "<"),
        (0, "LRANGE src 0 -1"),
        // BLMOVE's destination serves the next waiter.
        (2, "> BLPOP chain 0"),
        (1, "> BLMOVE src2 chain LEFT LEFT 0"),
        (0, "RPUSH src2 m"),
        (1, "<"),
        (2, "<"),
        // A waiter of the other kind does not hold up those behind it.
        (1, "> BZPOPMIN mixed 0"),
        (2, "> BLPOP mixed 0"),
        (0, "LPUSH mixed x"),
        (2, "<"),
        (1, "?"),
        (0, "ZADD mixed 1 m"),
        (1, "<"),
        // BLMPOP and BZMPOP check their timeout last.
        (0, "BLMPOP x 0 nokey LEFT"),
        (0, "BLMPOP x 1 nokey bogus"),
        (0, "BZMPOP -1 1 nokey MIN COUNT 0"),
        (0, "BLPOP nokey 9223372036854776"),
        (0, "BLPOP nokey 0x1p-20"),
        // A sorted set stored by ZUNIONSTORE or ZRANGESTORE serves the
        // waiters on its key.
        (0, "ZADD zsrc 1 a 2 b 3 c"),
        (1, "> BZPOPMIN zdst 0"),
        (0, "ZUNIONSTORE zdst 1 zsrc WEIGHTS 2"),
        (1, "<"),
        (2, "> BZPOPMAX zdst2 0"),
        (0, "ZRANGESTORE zdst2 zsrc 0 1"),
        (2, "<"),
        (0, "ZRANGE zdst 0 -1 WITHSCORES"),
        // BLMPOP with a count, from the second key.
        (1, "> BLMPOP 0 2 m1 m2 RIGHT COUNT 5"),
        (0, "RPUSH m2 a b c"),
        (1, "<"),
        // Sorted sets.
        (1, "> BZPOPMAX z 0"),
        (0, "ZADD z 1 a 2 b"),
        (1, "<"),
        (1, "BZPOPMIN z 0"),
        (1, "EXISTS z"),
        // CLIENT UNBLOCK: as a timeout, as an error, and when not blocked.
        (1, "> BLPOP u 0"),
        (0, "UNBLOCK 1"),
        (1, "<"),
        (1, "> BLPOP u 0"),
        (0, "UNBLOCK 1 ERROR"),
        (1, "<"),
        (0, "UNBLOCK 1"),
        (0, "UNBLOCK 1 foo"),
        (0, "CLIENT UNBLOCK abc"),
        (0, "CLIENT UNBLOCK"),
        (0, "CLIENT UNBLOCK 1 TIMEOUT x"),
        // A waiter that leaves is forgotten: the element stays.
        (3, "> BLPOP gone 0"),
        (3, "close"),
        (0, "INFO-BLOCKED"),
        (0, "RPUSH gone 1"),
        (0, "LLEN gone"),
        // SWAPDB brings the other database's list to the waiter.
        (1, "> BLPOP sw 0"),
        (0, "SELECT 1"),
        (0, "RPUSH sw fromdb1"),
        (0, "SWAPDB 0 1"),
        (0, "SELECT 0"),
        (1, "<"),
        (0, "SWAPDB 0 1"),
        // A timeout while another waiter is served.
        (1, "> BLPOP slow 0.1"),
        (2, "> BLPOP fast 0"),
        (0, "RPUSH fast f"),
        (2, "<"),
        (1, "<"),
        // Errors, in Redis's order.
        (0, "BLPOP a x"),
        (0, "BLPOP a -1"),
        (0, "BLPOP a inf"),
        (0, "BLPOP a nan"),
        (0, "BLPOP str 0"),
        (0, "BLPOP none str 0"),
        (0, "BLMOVE a b UP LEFT x"),
        (0, "BLMOVE a b LEFT LEFT x"),
        (0, "BRPOPLPUSH a b -1"),
        (0, "BLMPOP x 1 a LEFT"),
        (0, "BLMPOP 0 0 a LEFT"),
        (0, "LMPOP 0 a LEFT"),
        (0, "LMPOP 2 a LEFT"),
        (0, "LMPOP 1 a UP"),
        (0, "LMPOP 1 a LEFT COUNT"),
        (0, "LMPOP 1 a LEFT COUNT 0"),
        (0, "LMPOP 1 a LEFT COUNT 1 COUNT 2"),
        (0, "LMPOP 1 none LEFT"),
        (0, "RPUSH lm 1 2 3"),
        (0, "LMPOP 2 none lm RIGHT COUNT 2"),
        (0, "LMPOP 2 str lm LEFT"),
        (0, "BZPOPMIN str 0"),
        // ZMPOP and BZMPOP.
        (0, "ZADD zm 1 a 2 b 3 c"),
        (0, "ZMPOP 1 zm MIN"),
        (0, "ZMPOP 2 none zm MAX COUNT 5"),
        (0, "ZMPOP 1 zm MIN"),
        (0, "ZMPOP 0 zm MIN"),
        (0, "ZMPOP 1 zm UP"),
        (0, "ZMPOP 1 zm MIN COUNT 0"),
        (0, "ZMPOP 2 zm MIN"),
        (0, "ZMPOP 1 str MIN"),
        (0, "ZMPOP 1 lm MIN"),
        (0, "BZMPOP x 1 zm MIN"),
        (0, "BZMPOP 0.05 1 zm MIN"),
        (1, "> BZMPOP 0 2 zm1 zm2 MIN COUNT 2"),
        (0, "ZADD zm2 5 x 4 y 6 z"),
        (1, "<"),
        (0, "ZRANGE zm2 0 -1 WITHSCORES"),
        (0, "BLPOP"),
        (0, "INFO-BLOCKED"),
    ];
    let theirs = same_steps(&redis, &ours, 4, steps);
    assert!(theirs.iter().filter(|l| l.contains("nil-array")).count() >= 8, "{theirs:#?}");
    ours.stop();
}

/// A job queue as Sidekiq and Celery run one: workers wait in BRPOP while
/// producers LPUSH; every job is taken exactly once, none is lost, and the
/// workers time out once the queue stays empty.
#[test]
fn brpop_workers_take_every_job_exactly_once() {
    let ours = Server::start(ServeOptions::default());
    let addr = ours.addr;
    const JOBS: usize = 2000;
    let workers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let s = connect(addr);
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut got = Vec::new();
                loop {
                    (&s).write_all(&command(&[b"BRPOP", b"jobs", b"0.5"])).unwrap();
                    let reply = read_reply(&mut r);
                    if reply == "nil-array" {
                        return got;
                    }
                    let job = reply.trim_start_matches("[jobs, ").trim_end_matches(']').to_owned();
                    got.push(job.parse::<usize>().unwrap());
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            std::thread::spawn(move || {
                let s = connect(addr);
                let mut r = BufReader::new(s.try_clone().unwrap());
                for j in (p..JOBS).step_by(2) {
                    (&s).write_all(&command(&[b"LPUSH", b"jobs", j.to_string().as_bytes()])).unwrap();
                    assert!(read_reply(&mut r).starts_with(':'));
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut all: Vec<usize> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    all.sort_unstable();
    assert_eq!(all, (0..JOBS).collect::<Vec<_>>(), "every job once");
    let stats = ours.stop();
    assert_eq!(stats.protocol_errors + stats.reply_dropped, 0);
}

/// HRANDFIELD, one command a `redis-cli` run (`=` exact, `~` as a set of
/// lines, `#` by number of lines: a random pick), against redis-server.
#[test]
fn hrandfield_answers_as_redis_server_does() {
    same_answers_line_by_line(
        "= FLUSHALL
= HSET h a 1 b 2 c 3
= SET str v
= HRANDFIELD nokey
= HRANDFIELD nokey 2
= HRANDFIELD nokey 2 WITHVALUES
= HRANDFIELD h 0
= HRANDFIELD h x
= HRANDFIELD h 1 foo
= HRANDFIELD h 1 WITHVALUES x
= HRANDFIELD h -9223372036854775808
= HRANDFIELD h -9223372036854775807 WITHVALUES
= HRANDFIELD str
= HRANDFIELD str 1
= HRANDFIELD str x
~ HRANDFIELD h 5 WITHVALUES
~ HRANDFIELD h 3
# HRANDFIELD h
# HRANDFIELD h 2
# HRANDFIELD h 2 WITHVALUES
# HRANDFIELD h -7
# HRANDFIELD h -7 withvalues
= HSET one f v
= HRANDFIELD one
= HRANDFIELD one -3 WITHVALUES",
    );
}

#[test]
fn incrbyfloat_and_hincrbyfloat_answer_as_redis_server_does() {
    same_answers_line_by_line(
        "= FLUSHALL
= SET k 10.5
= INCRBYFLOAT k 0.1
= INCRBYFLOAT k -5.0e3
= INCRBYFLOAT k x
= INCRBYFLOAT k inf
= INCRBYFLOAT k nan
= INCRBYFLOAT k \" 1\"
= INCRBYFLOAT nokey 3
= INCRBYFLOAT nokey 0x1p-18
= SET big 1e4931
= INCRBYFLOAT big 1e4931
= INCRBYFLOAT big -1e4931
= SET notnum abc
= INCRBYFLOAT notnum 1
= SET ttl 1
= EXPIRE ttl 1000
= INCRBYFLOAT ttl 1.5
= TTL ttl
= RPUSH list a
= INCRBYFLOAT list 1
= INCRBYFLOAT list x
= INCRBYFLOAT k
= HINCRBYFLOAT h f 1.25
= HINCRBYFLOAT h f 0.1
= HINCRBYFLOAT h f inf
= HINCRBYFLOAT h f -inf
= HINCRBYFLOAT h f nan
= HINCRBYFLOAT h f x
= HSET h s text
= HINCRBYFLOAT h s 1
= HINCRBYFLOAT list f 1
= HINCRBYFLOAT list f x
= HINCRBYFLOAT list f inf
= HSET h big 1e4931
= HINCRBYFLOAT h big 1e4931
= HINCRBY h f 1
= HINCRBY list f x
= HINCRBY list f 1
= HSET h n 9223372036854775807
= HINCRBY h n 1
= HINCRBYFLOAT h n 1
~ HGETALL h
= FLUSHALL",
    );
}

/// A number as people and programs write them, or a text close to one:
/// decimal and hexadecimal, long and short, up to the ends of the
/// `long double` range, with signs, infinities and malformed forms.
fn random_number(rng: &mut fastrand::Rng) -> String {
    let digits = |rng: &mut fastrand::Rng, n: usize, hex: bool| -> String {
        let set: &[u8] = if hex { b"0123456789abcdef" } else { b"0123456789" };
        (0..n).map(|_| set[rng.usize(..set.len())] as char).collect()
    };
    let sign = ["", "", "-", "+"][rng.usize(..4)];
    match rng.u8(..20) {
        0 => ["inf", "-inf", "nan", "", " 1", "1 ", "1e", "0x", ".", "1e+", "Infinity", "0x1p"][rng.usize(..12)].into(),
        1..=2 => {
            let (m, f) = (rng.usize(1..5), rng.usize(0..5));
            format!("{sign}0x{}.{}p{}", digits(rng, m, true), digits(rng, f, true), rng.i32(-16500..16500))
        }
        3..=8 => format!("{sign}{}", rng.i64(..)),
        _ => {
            let (m, f) = (rng.usize(0..22), rng.usize(0..22));
            let exp = match rng.u8(..4) {
                0 => String::new(),
                1 => format!("e{}", rng.i32(-4960..4940)),
                _ => format!("e{}", rng.i32(-30..30)),
            };
            let frac = if f == 0 && rng.bool() { String::new() } else { format!(".{}", digits(rng, f, false)) };
            format!("{sign}{}{frac}{exp}", digits(rng, m.max(usize::from(frac.is_empty())), false))
        }
    }
}

/// Thousands of random sums, pipelined on one connection to each server:
/// every INCRBYFLOAT and HINCRBYFLOAT answer (sums, their last digits,
/// refusals) is redis-server's, and so are the running totals of a key
/// many numbers are added to.
#[test]
fn random_incrbyfloat_sums_are_redis_server_s_to_the_last_digit() {
    if find("redis-server").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let mut rng = fastrand::Rng::with_seed(0x1d0b1e);
    let pairs: Vec<(String, String)> = (0..1000).map(|_| (random_number(&mut rng), random_number(&mut rng))).collect();
    let answers = |port: u16| -> Vec<String> {
        let mut s = connect(SocketAddr::from(([127, 0, 0, 1], port)));
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut out = Vec::new();
        for chunk in pairs.chunks(100) {
            let mut batch = Vec::new();
            for (a, b) in chunk {
                batch.extend(command(&[b"SET", b"k", a.as_bytes()]));
                batch.extend(command(&[b"INCRBYFLOAT", b"k", b.as_bytes()]));
                batch.extend(command(&[b"INCRBYFLOAT", b"total", b.as_bytes()]));
                batch.extend(command(&[b"HINCRBYFLOAT", b"h", b"f", a.as_bytes()]));
            }
            s.write_all(&batch).unwrap();
            out.extend((0..4 * chunk.len()).map(|_| read_reply(&mut r)));
        }
        out
    };
    let (theirs, mine) = (answers(redis.port), answers(ours.addr.port()));
    let sums = theirs.iter().filter(|a| !a.starts_with('-') && *a != "OK").count();
    assert!(sums > 2500, "too few sums to compare: {sums} of {}", theirs.len());
    for (i, (m, t)) in mine.iter().zip(&theirs).enumerate() {
        let (a, b) = &pairs[i / 4];
        assert_eq!(m, t, "answer {i} differs (ours, then redis-server's), for {a:?} and {b:?}");
    }
    assert_eq!(mine.len(), theirs.len());
    ours.stop();
}

/// Every key of every database of the server at `port`, described so that
/// two servers holding the same data describe it alike: its type, whether
/// it has a time to live, and its content (hash fields and set members
/// sorted, lists and sorted sets in their order).
fn describe_keyspace(port: u16) -> Vec<String> {
    let s = connect(SocketAddr::from(([127, 0, 0, 1], port)));
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut ask = |args: &[&[u8]]| -> String {
        (&s).write_all(&command(args)).unwrap();
        read_reply(&mut r)
    };
    let items = |reply: &str| -> Vec<String> {
        let inner = reply.trim_start_matches('[').trim_end_matches(']');
        if inner.is_empty() {
            Vec::new()
        } else {
            inner.split(", ").map(str::to_owned).collect()
        }
    };
    let mut out = Vec::new();
    for db in 0..16 {
        ask(&[b"SELECT", db.to_string().as_bytes()]);
        let mut keys = items(&ask(&[b"KEYS", b"*"]));
        keys.sort();
        for key in keys {
            let k = key.as_bytes();
            let kind = ask(&[b"TYPE", k]);
            let ttl = ask(&[b"PTTL", k]);
            let content = match kind.as_str() {
                "+string" => ask(&[b"GET", k]),
                "+list" => ask(&[b"LRANGE", k, b"0", b"-1"]),
                "+hash" => {
                    let flat = items(&ask(&[b"HGETALL", k]));
                    let mut pairs: Vec<String> = flat.chunks(2).map(|p| p.join("=")).collect();
                    pairs.sort();
                    pairs.join(" ")
                }
                "+set" => {
                    let mut m = items(&ask(&[b"SMEMBERS", k]));
                    m.sort();
                    m.join(" ")
                }
                "+zset" => ask(&[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"]),
                other => format!("type {other}"),
            };
            let expires = if ttl.trim_start_matches(':').parse::<i64>().unwrap_or(-1) > 0 { "ttl" } else { "no ttl" };
            out.push(format!("db{db} {key}: {kind} {expires} {content}"));
        }
    }
    out
}

/// What the snapshot tests store: every type, in the encodings
/// redis-server picks for small and large ones (integers and LZF strings,
/// listpacks, intsets, quicklists; hash tables and skip lists), times to
/// live, binary values, two databases.
fn snapshot_script() -> String {
    let many = |n: usize, f: &dyn Fn(usize) -> String| (0..n).map(f).collect::<Vec<_>>().join(" ");
    [
        "FLUSHALL".to_owned(),
        "SET s hello".into(),
        "SET int 12345".into(),
        "SET neg -7".into(),
        "SET bin \"a\\x00b\\xffc\"".into(),
        format!("SET long {}", "xy".repeat(400)),
        "SET ttl v EX 1000".into(),
        "RPUSH l a b c 1 2 -3".into(),
        "RPUSH one only".into(),
        format!("RPUSH biglist {}", many(300, &|i| format!("e{i}"))),
        format!("RPUSH widelist {} {}", "w".repeat(9000), "short"),
        "HSET h f1 v1 f2 2".into(),
        format!("HSET bigh {}", many(200, &|i| format!("f{i} v{i}"))),
        "SADD si 1 2 3 -5 100000 -9223372036854775808".into(),
        "SADD ss a b c".into(),
        format!("SADD bigs {}", many(600, &|i| i.to_string())),
        "ZADD z 1 a 2.5 b -inf c inf d 0 e 1e-300 f".into(),
        format!("ZADD bigz {}", many(200, &|i| format!("{}.5 m{i}", i))),
        "PEXPIRE l 500000".into(),
        "SELECT 5".into(),
        "SET other db5".into(),
        "ZADD z5 1 x".into(),
        "SELECT 0".into(),
    ]
    .join("\n")
}

/// A snapshot this server writes is one redis-server loads (and
/// redis-check-rdb passes), holding the same keys; and one redis-server
/// writes (its compact encodings) is one this server loads, the same keys
/// again.
#[test]
fn snapshots_move_both_ways_between_this_server_and_redis_server() {
    if find("redis-server").is_none() || find("redis-check-rdb").is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("cf-rdb-{}", std::process::id()));
    let (ours_dir, theirs_dir) = (dir.join("ours"), dir.join("theirs"));
    std::fs::create_dir_all(&ours_dir).unwrap();
    std::fs::create_dir_all(&theirs_dir).unwrap();
    let script = snapshot_script();

    // Ours -> redis-server.
    let at = ours_dir.clone();
    let ours = Server::launch(ServeOptions::default(), |c| c, move |db| db.set_rdb_path(&at, "dump.rdb"));
    redis_cli(ours.addr.port(), &script);
    let said = redis_cli(ours.addr.port(), "CONFIG GET dir\nSAVE\nLASTSAVE");
    assert_eq!(said[..3], ["dir", ours_dir.canonicalize().unwrap().to_str().unwrap(), "OK"], "{said:?}");
    let file = ours_dir.join("dump.rdb");
    let check = Command::new("redis-check-rdb").arg(&file).output().unwrap();
    let check_text = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(check_text.contains("RDB looks OK"), "{check_text}");
    let ours_keys = describe_keyspace(ours.addr.port());
    let dir_arg = ours_dir.to_str().unwrap();
    let loaded_by_redis = RedisServer::start_with(&["--dir", dir_arg, "--dbfilename", "dump.rdb"]);
    assert_eq!(describe_keyspace(loaded_by_redis.port), ours_keys);
    assert!(ours_keys.len() >= 18, "{ours_keys:?}");
    drop(loaded_by_redis);
    ours.stop();

    // redis-server -> ours.
    let redis = RedisServer::start_with(&["--dir", theirs_dir.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    redis_cli(redis.port, &script);
    assert_eq!(redis_cli(redis.port, "SAVE"), ["OK"]);
    let theirs_keys = describe_keyspace(redis.port);
    let file = theirs_dir.join("dump.rdb");
    let (tx, rx) = mpsc::channel();
    let loaded = Server::launch(ServeOptions::default(), |c| c, move |db| tx.send(db.load_rdb(&file)).unwrap());
    assert_eq!(rx.recv().unwrap(), Ok(theirs_keys.len()));
    assert_eq!(describe_keyspace(loaded.addr.port()), theirs_keys);
    loaded.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn save_bgsave_and_lastsave_answer_as_redis_server_does() {
    same_answers_line_by_line(
        "= SET k v
= BGSAVE x
= BGSAVE SCHEDULE x
= SAVE x
= LASTSAVE x
= MULTI
= CONFIG SET dbfilename a/b
= CONFIG SET dir /tmp
= CONFIG GET dbfilename",
    );
}

/// Our server with its snapshots going to `file` in a new temporary
/// directory (removed by the caller), and that directory.
fn server_saving_to(file: &'static str) -> (Server, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("cf-{}-{}", file.trim_end_matches(".rdb"), std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let at = dir.clone();
    (Server::launch(ServeOptions::default(), |c| c, move |db| db.set_rdb_path(&at, file)), dir)
}

/// BGSAVE writes from a thread while commands go on; INFO says when it is
/// done and how many changes came after; redis-server loads the file.
#[test]
fn bgsave_finishes_in_the_background_and_redis_server_loads_it() {
    if find("redis-server").is_none() {
        return;
    }
    let (ours, dir) = server_saving_to("bg.rdb");
    let port = ours.addr.port();
    redis_cli(port, &format!("SET a 1\nRPUSH l {}", "x ".repeat(5000)));
    assert_eq!(redis_cli(port, "BGSAVE"), ["Background saving started"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let info = loop {
        let info = redis_cli(port, "INFO persistence").join("\n");
        if info.contains("rdb_bgsave_in_progress:0") {
            break info;
        }
        assert!(Instant::now() < deadline, "BGSAVE did not finish: {info}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(info.contains("rdb_last_bgsave_status:ok") && info.contains("rdb_changes_since_last_save:0"), "{info}");
    redis_cli(port, "SET b 2");
    let info = redis_cli(port, "INFO persistence").join("\n");
    assert!(info.contains("rdb_changes_since_last_save:1"), "{info}");
    ours.stop();
    let redis = RedisServer::start_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", "bg.rdb"]);
    assert_eq!(redis_cli(redis.port, "GET a\nGET b\nLLEN l"), ["1", "", "5000"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn save_points_and_shutdown_errors_answer_as_redis_server_does() {
    same_answers_line_by_line(
        "= CONFIG SET save 1
= CONFIG SET save \"x 1\"
= CONFIG SET save \"-1 5\"
= CONFIG SET save \"0 5\"
= CONFIG SET save \"3600 1 300 100\"
= CONFIG GET save
= CONFIG SET save \"\"
= CONFIG GET save
= SHUTDOWN ABORT
= SHUTDOWN foo
= SHUTDOWN NOSAVE SAVE
= SHUTDOWN SAVE ABORT",
    );
}

/// A save point saves in the background once reached; SHUTDOWN SAVE
/// writes a last snapshot and stops the server, whose file redis-server
/// then loads.
#[test]
fn save_points_and_shutdown_save_keep_the_data() {
    if find("redis-server").is_none() {
        return;
    }
    let (ours, dir) = server_saving_to("points.rdb");
    let port = ours.addr.port();
    assert_eq!(redis_cli(port, "CONFIG SET save \"1 2\"\nSET a 1\nSET b 2"), ["OK", "OK", "OK"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join("points.rdb").exists() {
        assert!(Instant::now() < deadline, "the save point never saved");
        std::thread::sleep(Duration::from_millis(50));
    }
    redis_cli(port, "SET c 3");
    // The connection closes without an answer, as from Redis.
    assert!(redis_cli(port, "SHUTDOWN SAVE").is_empty());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ours.thread.as_ref().unwrap().is_finished() {
        assert!(Instant::now() < deadline, "SHUTDOWN did not stop the server");
        std::thread::sleep(Duration::from_millis(20));
    }
    ours.stop();
    let redis = RedisServer::start_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", "points.rdb"]);
    assert_eq!(redis_cli(redis.port, "MGET a b c"), ["1", "2", "3"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// MONITOR: what a monitor hears of another connection's commands is what
/// redis-server's monitor hears (but the time and the client's port): which
/// commands show (not the refused, queued or admin ones; EXEC's after
/// them), quoting, redacted passwords, the database.
#[test]
fn monitor_shows_what_redis_server_shows() {
    if find("redis-server").is_none() {
        return;
    }
    let redis = RedisServer::start();
    let ours = Server::start(ServeOptions::default());
    let script: &[&[&[u8]]] = &[
        &[b"SET", b"k", b"v"],
        &[b"GET", b"k"],
        &[b"SELECT", b"2"],
        &[b"SET", b"a b", b"x\ny\x01\"\\"],
        &[b"MULTI"],
        &[b"SET", b"q", b"1"],
        &[b"INCR", b"q"],
        &[b"EXEC"],
        &[b"AUTH", b"pw"],
        &[b"AUTH", b"user", b"pw"],
        &[b"HELLO", b"2", b"AUTH", b"default", b"pw"],
        &[b"CONFIG", b"GET", b"save"],
        &[b"NOSUCH", b"x"],
        &[b"GET"],
        &[b"CLIENT", b"ID"],
        &[b"PING"],
        &[b"SELECT", b"0"],
        &[b"LPUSH", b"l", b"5"],
        &[b"INCR", b"l"],
        &[b"DISCARD"],
        &[b"ECHO", b"\t\x07"],
        &[b"QUIT"],
    ];
    let heard = |port: u16| -> Vec<String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let monitor = connect(addr);
        let mut m = BufReader::new(monitor.try_clone().unwrap());
        (&monitor).write_all(&command(&[b"MONITOR"])).unwrap();
        assert_eq!(read_reply(&mut m), "+OK");
        let c = connect(addr);
        let mut r = BufReader::new(c.try_clone().unwrap());
        r.get_ref().set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let all: Vec<u8> = script.iter().flat_map(|args| command(args)).collect();
        (&c).write_all(&all).unwrap();
        for _ in script {
            read_reply(&mut r);
        }
        m.get_ref().set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let mut lines = Vec::new();
        let mut line = String::new();
        while m.read_line(&mut line).is_ok_and(|n| n > 0) {
            // `+<time> [<db> <addr>] args`: the time and the port differ.
            let rest = line.trim_end().split_once(' ').map_or("", |(_, r)| r);
            let (db_addr, args) = rest.split_once("] ").unwrap_or((rest, ""));
            let db = db_addr.trim_start_matches('[').split(' ').next().unwrap_or("");
            lines.push(format!("[{db}] {args}"));
            line.clear();
        }
        lines
    };
    let theirs = heard(redis.port);
    let mine = heard(ours.addr.port());
    assert!(theirs.len() >= 19, "{theirs:?}");
    assert_eq!(mine, theirs);
    ours.stop();
}
