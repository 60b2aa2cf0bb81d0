//! An open-loop load generator that speaks RESP2, for the paper's YCSB
//! experiment against any Redis-compatible server (redis-server, ours).
//!
//! Each client thread owns one TCP connection and sends requests at
//! Poisson arrival times whether or not earlier replies came back (open
//! loop; RESP replies come back in order, so the connection is the
//! queue). Latency runs from a request's *scheduled* arrival to its reply.
//! Every reply is checked byte for byte against the value its key holds
//! ([`check_value`]). Requests: `GET k` (one 2 KiB value), `MGET k1 k2`
//! (two keys), `LRANGE l:k 0 -1` (a two-element list), keys drawn from
//! YCSB's scrambled Zipfian; and the Twitter workload (paper Figure 8):
//! `GET k` of plain values, `LRANGE k 0 -1` of values chunked into lists,
//! and puts that write a key's own value back (`SET k v`, or `DEL k` +
//! `RPUSH k chunks...` for a list, which stays consistent because each
//! connection's commands run in order and Twitter points use one).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use cornflakes_workloads::{check_value, fill_value, Op, Transaction, Workload, WorkloadSpec};
use hdrhistogram::Histogram;
use rand::{rngs::SmallRng, SeedableRng};
use rand_distr::{Distribution, Exp};
use smallvec::{smallvec, SmallVec};

use crate::Error;

/// The requests of the paper's Redis experiment: YCSB's (Table 3) and
/// the Twitter workload's (Figure 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RespOp {
    /// `GET key`: one value.
    Get,
    /// `MGET key1 key2`: two values.
    Mget2,
    /// `LRANGE l:key 0 -1`: a list of two values.
    Lrange2,
    /// The Twitter workload: gets of plain and list values, 8 % puts.
    Twitter,
}

impl RespOp {
    /// The YCSB requests, in table order.
    pub const YCSB: [RespOp; 3] = [RespOp::Get, RespOp::Mget2, RespOp::Lrange2];

    /// The name in results.
    pub fn name(self) -> &'static str {
        match self {
            RespOp::Get => "get",
            RespOp::Mget2 => "mget-2",
            RespOp::Lrange2 => "lrange-2",
            RespOp::Twitter => "twitter",
        }
    }
}

/// One load point.
#[derive(Clone, Debug)]
pub struct RespLoadConfig {
    /// The server.
    pub addr: SocketAddr,
    /// Request type.
    pub op: RespOp,
    /// Keys (YCSB: each a plain value and a two-element list `l:<key>`).
    pub keys: u32,
    /// Bytes of each value (and list element); YCSB only.
    pub size: u32,
    /// Offered requests per second, all threads together.
    pub rate: f64,
    /// Client threads (connections).
    pub threads: usize,
    /// Unrecorded time first.
    pub warmup: Duration,
    /// Recorded time.
    pub duration: Duration,
    /// A reply later than this fails the point (the connection is stuck).
    pub timeout: Duration,
    /// Seed of arrivals and keys.
    pub seed: u64,
    /// Core to pin the client threads to.
    pub core: Option<usize>,
    /// LRANGE reads the list stored at the key itself (as the server's
    /// `ycsb:fields=2` preload stores it) instead of at `l:<key>` (as
    /// [`preload`] does).
    pub lists_at_keys: bool,
}

/// What one load point measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RespLoadResult {
    /// Offered requests per second.
    pub offered: f64,
    /// Correct replies per second of recorded time.
    pub achieved: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Recorded requests answered correctly.
    pub completed: u64,
    /// Replies that were wrong (any byte, length, type).
    pub errors: u64,
    /// Recorded requests not answered by the end of the point (plus the
    /// timeout).
    pub unanswered: u64,
}

fn workload(keys: u32, size: u32) -> Result<Box<dyn Workload>, Error> {
    WorkloadSpec::Ycsb { keys, fields: 1, size }.build().map_err(|e| Error::Invalid(e.to_string()))
}

/// The Twitter workload over `keys` keys (its default share of puts).
pub fn twitter(keys: u32) -> Result<Box<dyn Workload>, Error> {
    format!("twitter:keys={keys}")
        .parse::<WorkloadSpec>()
        .and_then(|s| s.build())
        .map_err(|e| Error::Invalid(e.to_string()))
}

/// Appends the commands that store key `i`'s value as the workload holds
/// it: `SET k v` for one value, `DEL k` + `RPUSH k elements...` for a list.
/// Returns the number of replies they produce.
fn push_store(w: &dyn Workload, i: u32, key: &mut Vec<u8>, sizes: &mut Vec<u32>, out: &mut Vec<u8>) -> usize {
    w.key(i, key);
    w.value_sizes(i, sizes);
    let mut value = Vec::new();
    if let [size] = sizes[..] {
        value.resize(size as usize, 0);
        fill_value(i, 0, &mut value);
        out.extend_from_slice(b"*3\r\n");
        push_bulk(out, b"SET");
        push_bulk(out, key);
        push_bulk(out, &value);
        return 1;
    }
    out.extend_from_slice(b"*2\r\n");
    push_bulk(out, b"DEL");
    push_bulk(out, key);
    out.extend_from_slice(format!("*{}\r\n", sizes.len() + 2).as_bytes());
    push_bulk(out, b"RPUSH");
    push_bulk(out, key);
    for (e, &size) in sizes.iter().enumerate() {
        value.resize(size as usize, 0);
        fill_value(i, e as u32, &mut value);
        push_bulk(out, &value);
    }
    2
}

/// Stores every key of `w` as [`push_store`] does, pipelined, and checks
/// that no reply is an error.
///
/// # Errors
///
/// When the server cannot be reached or refuses a write.
pub fn preload_workload(addr: SocketAddr, w: &dyn Workload) -> Result<(), Error> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    let (mut key, mut sizes, mut out, mut got) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut buf = vec![0u8; 65536];
    for start in (0..w.num_keys()).step_by(200) {
        out.clear();
        let replies: usize =
            (start..w.num_keys().min(start + 200)).map(|i| push_store(w, i, &mut key, &mut sizes, &mut out)).sum();
        s.write_all(&out).map_err(|e| format!("preload: {e}"))?;
        got.clear();
        let mut at = 0;
        for _ in 0..replies {
            loop {
                if let Some((parsed, next)) = parse_reply(&got, at)? {
                    if let Parsed::Line(a, b) = parsed {
                        if got[a..b].starts_with(b"-") {
                            return Err(Error::Failed(format!(
                                "preload refused: {}",
                                String::from_utf8_lossy(&got[a..b])
                            )));
                        }
                    }
                    at = next;
                    break;
                }
                let r = s.read(&mut buf).map_err(|e| format!("preload: {e}"))?;
                if r == 0 {
                    return Err("preload: the server closed the connection".into());
                }
                got.extend_from_slice(&buf[..r]);
            }
        }
    }
    Ok(())
}

fn push_lrange(out: &mut Vec<u8>, key: &[u8]) {
    out.extend_from_slice(b"*4\r\n");
    push_bulk(out, b"LRANGE");
    push_bulk(out, key);
    push_bulk(out, b"0");
    push_bulk(out, b"-1");
}

fn push_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Stores every key's value and list, pipelined, and checks the replies.
///
/// # Errors
///
/// When the server cannot be reached or refuses a write.
pub fn preload(addr: SocketAddr, keys: u32, size: u32) -> Result<(), Error> {
    let w = workload(keys, size)?;
    let mut s = TcpStream::connect(addr).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    let (mut key, mut value, mut list_key) = (Vec::new(), vec![0u8; size as usize], Vec::new());
    let mut expected = Vec::new();
    for start in (0..keys).step_by(500) {
        let mut out = Vec::new();
        expected.clear();
        for i in start..keys.min(start + 500) {
            w.key(i, &mut key);
            fill_value(i, 0, &mut value);
            out.extend_from_slice(b"*3\r\n");
            push_bulk(&mut out, b"SET");
            push_bulk(&mut out, &key);
            push_bulk(&mut out, &value);
            expected.extend_from_slice(b"+OK\r\n");
            list_key.clear();
            list_key.extend_from_slice(b"l:");
            list_key.extend_from_slice(&key);
            out.extend_from_slice(b"*2\r\n");
            push_bulk(&mut out, b"DEL");
            push_bulk(&mut out, &list_key);
            out.extend_from_slice(b"*4\r\n");
            push_bulk(&mut out, b"RPUSH");
            push_bulk(&mut out, &list_key);
            push_bulk(&mut out, &value);
            fill_value(i, 1, &mut value);
            push_bulk(&mut out, &value);
        }
        s.write_all(&out).map_err(|e| format!("preload: {e}"))?;
        // Replies: +OK, :0 or :1 (DEL), :2 (RPUSH) per key.
        let n = keys.min(start + 500) - start;
        let mut got = Vec::new();
        let mut lines = 0;
        let mut buf = [0u8; 65536];
        while lines < 3 * n {
            let r = s.read(&mut buf).map_err(|e| format!("preload: {e}"))?;
            if r == 0 {
                return Err("preload: the server closed the connection".into());
            }
            got.extend_from_slice(&buf[..r]);
            lines = got.iter().filter(|&&b| b == b'\n').count() as u32;
        }
        if got.split(|&b| b == b'\n').any(|l| l.starts_with(b"-")) {
            return Err(Error::Failed(format!("preload refused: {}", String::from_utf8_lossy(&got))));
        }
    }
    Ok(())
}

/// A reply parsed from a buffer: the byte ranges of its values (`None`
/// for a nil), or the range of a one-line reply (`+OK`, `:2`, `-ERR ...`).
enum Parsed {
    Values(Vec<Option<(usize, usize)>>),
    Line(usize, usize),
}

/// Parses one reply at `buf[at..]`; `Ok(None)` when incomplete.
fn parse_reply(buf: &[u8], at: usize) -> Result<Option<(Parsed, usize)>, Error> {
    fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
        let end = buf[at..].windows(2).position(|w| w == b"\r\n")?;
        Some((&buf[at..at + end], at + end + 2))
    }
    fn number(l: &[u8]) -> Result<i64, Error> {
        std::str::from_utf8(&l[1..])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::Failed(format!("bad reply line {:?}", String::from_utf8_lossy(l))))
    }
    /// A bulk's value range (`None`: nil) and where the next reply starts.
    type Bulk = (Option<(usize, usize)>, usize);
    fn bulk(buf: &[u8], at: usize) -> Result<Option<Bulk>, Error> {
        let Some((l, next)) = line(buf, at) else { return Ok(None) };
        if l.first() != Some(&b'$') {
            return Err(Error::Failed(format!("expected a bulk, got {:?}", String::from_utf8_lossy(l))));
        }
        let n = number(l)?;
        if n < 0 {
            return Ok(Some((None, next)));
        }
        let end = next + n as usize;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        Ok(Some((Some((next, end)), end + 2)))
    }
    let Some((l, next)) = line(buf, at) else { return Ok(None) };
    match l.first() {
        Some(b'$') => Ok(bulk(buf, at)?.map(|(v, n)| (Parsed::Values(vec![v]), n))),
        Some(b'*') => {
            let count = number(l)?;
            let mut vals = Vec::new();
            let mut p = next;
            for _ in 0..count.max(0) {
                let Some((v, n)) = bulk(buf, p)? else { return Ok(None) };
                vals.push(v);
                p = n;
            }
            Ok(Some((Parsed::Values(vals), p)))
        }
        _ => Ok(Some((Parsed::Line(at, next - 2), next))),
    }
}

/// What a reply must be.
enum Expect {
    /// Values, in order: (key, element, length) each.
    Values(SmallVec<[(u32, u32, u32); 2]>),
    /// `+OK`.
    Ok,
    /// An integer reply (`DEL`'s count, `RPUSH`'s length): any number.
    Integer,
}

/// A command sent and not yet answered.
struct Pending {
    arrival: Instant,
    expect: Expect,
    /// The last command of its transaction: its reply ends the latency.
    last: bool,
}

impl Expect {
    /// Whether `parsed` (in `buf`) is the reply this expects.
    fn holds(&self, parsed: &Parsed, buf: &[u8]) -> bool {
        match (self, parsed) {
            (Expect::Values(want), Parsed::Values(got)) => {
                want.len() == got.len()
                    && want
                        .iter()
                        .zip(got)
                        .all(|(&(k, e, len), r)| r.is_some_and(|(a, b)| check_value(k, e, len, &buf[a..b])))
            }
            (Expect::Ok, Parsed::Line(a, b)) => &buf[*a..*b] == b"+OK",
            (Expect::Integer, Parsed::Line(a, b)) => buf[*a..*b].starts_with(b":"),
            _ => false,
        }
    }
}

/// Runs one load point.
///
/// # Errors
///
/// When a connection fails or a reply is overdue by the timeout.
pub fn run_point(cfg: &RespLoadConfig) -> Result<RespLoadResult, Error> {
    let results: Vec<Result<ThreadResult, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads).map(|t| s.spawn(move || thread_main(cfg, t))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a client thread panicked".into()))).collect()
    });
    let mut hist = Histogram::<u64>::new(3).expect("histogram");
    let (mut errors, mut unanswered) = (0, 0);
    for r in results {
        let (h, e, u) = r?;
        hist.add(&h).map_err(|e| format!("histogram: {e}"))?;
        errors += e;
        unanswered += u;
    }
    let secs = cfg.duration.as_secs_f64();
    Ok(RespLoadResult {
        offered: cfg.rate,
        achieved: hist.len() as f64 / secs,
        p50_us: hist.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: hist.value_at_quantile(0.99) as f64 / 1e3,
        completed: hist.len(),
        errors,
        unanswered,
    })
}

/// A thread's latencies, wrong replies and unanswered requests.
type ThreadResult = (Histogram<u64>, u64, u64);

fn thread_main(cfg: &RespLoadConfig, thread: usize) -> Result<ThreadResult, Error> {
    if let Some(core) = cfg.core {
        crate::pin::pin_to_core(core)?;
    }
    let w = if cfg.op == RespOp::Twitter { twitter(cfg.keys)? } else { workload(cfg.keys, cfg.size)? };
    let mut gen = w.generator(cfg.seed.wrapping_add(thread as u64 * 7919));
    let mut rng = SmallRng::seed_from_u64(cfg.seed ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9));
    let gap = Exp::new(cfg.rate / cfg.threads as f64).map_err(|e| Error::Invalid(format!("rate: {e}")))?;
    let mut s = TcpStream::connect(cfg.addr).map_err(|e| format!("cannot connect to {}: {e}", cfg.addr))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut hist = Histogram::<u64>::new(3).expect("histogram");
    let (mut errors, mut txn, mut key, mut sizes) = (0u64, Transaction::default(), Vec::new(), Vec::new());
    let start = Instant::now();
    let (record_from, end) = (start + cfg.warmup, start + cfg.warmup + cfg.duration);
    let mut next = start + Duration::from_secs_f64(gap.sample(&mut rng));
    let mut out = Vec::<u8>::new();
    let (mut inbuf, mut in_at) = (Vec::<u8>::new(), 0);
    let mut pending = std::collections::VecDeque::<Pending>::new();
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        let now = Instant::now();
        if now >= end && (pending.is_empty() || now >= end + cfg.timeout) {
            break;
        }
        // Arrivals due.
        while next <= now && next < end {
            let arrival = next;
            let mut expect = |expect: Expect, last: bool| pending.push_back(Pending { arrival, expect, last });
            match cfg.op {
                RespOp::Get | RespOp::Mget2 | RespOp::Lrange2 => {
                    let mut keys = [0u32; 2];
                    let n = if cfg.op == RespOp::Mget2 { 2 } else { 1 };
                    for k in keys.iter_mut().take(n) {
                        gen.next(&mut txn);
                        *k = txn.requests[0].keys[0];
                    }
                    match cfg.op {
                        RespOp::Get => {
                            w.key(keys[0], &mut key);
                            out.extend_from_slice(b"*2\r\n");
                            push_bulk(&mut out, b"GET");
                            push_bulk(&mut out, &key);
                            expect(Expect::Values(smallvec![(keys[0], 0, cfg.size)]), true);
                        }
                        RespOp::Mget2 => {
                            out.extend_from_slice(b"*3\r\n");
                            push_bulk(&mut out, b"MGET");
                            for &k in &keys {
                                w.key(k, &mut key);
                                push_bulk(&mut out, &key);
                            }
                            expect(Expect::Values(keys.iter().map(|&k| (k, 0, cfg.size)).collect()), true);
                        }
                        _ => {
                            w.key(keys[0], &mut key);
                            if !cfg.lists_at_keys {
                                key.splice(0..0, *b"l:");
                            }
                            push_lrange(&mut out, &key);
                            expect(Expect::Values(smallvec![(keys[0], 0, cfg.size), (keys[0], 1, cfg.size)]), true);
                        }
                    }
                }
                RespOp::Twitter => {
                    gen.next(&mut txn);
                    let (op, k) = (txn.requests[0].op, txn.requests[0].keys[0]);
                    w.value_sizes(k, &mut sizes);
                    match op {
                        Op::Put => {
                            if push_store(w.as_ref(), k, &mut key, &mut sizes, &mut out) == 1 {
                                expect(Expect::Ok, true);
                            } else {
                                expect(Expect::Integer, false);
                                expect(Expect::Integer, true);
                            }
                        }
                        _ => {
                            w.key(k, &mut key);
                            if let [size] = sizes[..] {
                                out.extend_from_slice(b"*2\r\n");
                                push_bulk(&mut out, b"GET");
                                push_bulk(&mut out, &key);
                                expect(Expect::Values(smallvec![(k, 0, size)]), true);
                            } else {
                                push_lrange(&mut out, &key);
                                let elements = sizes.iter().enumerate().map(|(e, &len)| (k, e as u32, len)).collect();
                                expect(Expect::Values(elements), true);
                            }
                        }
                    }
                }
            }
            next += Duration::from_secs_f64(gap.sample(&mut rng));
        }
        // Send (requests are small: the socket buffer takes them).
        if !out.is_empty() {
            s.write_all(&out).map_err(|e| format!("send: {e}"))?;
            out.clear();
        }
        if pending.is_empty() {
            // Nothing to wait for but the next arrival: sleep until then.
            let until = next.min(end).saturating_duration_since(Instant::now());
            if !until.is_zero() {
                std::thread::sleep(until);
            }
            continue;
        }
        // Wait in the kernel for replies until the next arrival at most
        // (a spinning client loses its core on a busy machine).
        let wait = next
            .min(end)
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_micros(20), Duration::from_millis(10));
        s.set_read_timeout(Some(wait)).map_err(|e| e.to_string())?;
        match s.read(&mut chunk) {
            Ok(0) => return Err("the server closed the connection".into()),
            Ok(n) => inbuf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(Error::Failed(format!("receive: {e}"))),
        }
        while let Some((parsed, used)) = parse_reply(&inbuf, in_at)? {
            let p = pending.pop_front().ok_or("a reply nobody asked for")?;
            let ok = p.expect.holds(&parsed, &inbuf);
            in_at = used;
            let now = Instant::now();
            if !p.last {
                // A transaction's earlier command: only a wrong reply counts.
                errors += u64::from(!ok);
            } else if p.arrival >= record_from && p.arrival < end {
                if ok {
                    let _ = hist.record(now.duration_since(p.arrival).as_nanos() as u64);
                } else {
                    errors += 1;
                }
            } else if !ok {
                errors += 1;
            }
        }
        if in_at > 0 && in_at == inbuf.len() {
            inbuf.clear();
            in_at = 0;
        } else if in_at > (1 << 20) {
            inbuf.drain(..in_at);
            in_at = 0;
        }
        if let Some(p) = pending.front() {
            if now.duration_since(p.arrival) > cfg.timeout && now > p.arrival {
                return Err(Error::Failed(format!(
                    "{} at {} req/s: a reply is {:?} late (the server is overloaded or stuck); lower the rate",
                    cfg.op.name(),
                    cfg.rate,
                    cfg.timeout
                )));
            }
        }
    }
    let unanswered = pending.iter().filter(|p| p.last && p.arrival >= record_from && p.arrival < end).count() as u64;
    Ok((hist, errors, unanswered))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_holds_only_what_was_expected() {
        let mut v = vec![0u8; 100];
        fill_value(7, 1, &mut v);
        let mut wire = b"*1\r\n$100\r\n".to_vec();
        wire.extend_from_slice(&v);
        wire.extend_from_slice(b"\r\n+OK\r\n:3\r\n-ERR wrong\r\n");
        let (values, at) = parse_reply(&wire, 0).unwrap().unwrap();
        assert!(Expect::Values(smallvec![(7, 1, 100)]).holds(&values, &wire));
        assert!(!Expect::Values(smallvec![(7, 0, 100)]).holds(&values, &wire), "another element's bytes");
        assert!(!Expect::Values(smallvec![(7, 1, 100), (7, 2, 100)]).holds(&values, &wire), "a missing element");
        let (ok, at) = parse_reply(&wire, at).unwrap().unwrap();
        assert!(Expect::Ok.holds(&ok, &wire) && !Expect::Integer.holds(&ok, &wire));
        let (int, at) = parse_reply(&wire, at).unwrap().unwrap();
        assert!(Expect::Integer.holds(&int, &wire) && !Expect::Ok.holds(&int, &wire));
        let (err, _) = parse_reply(&wire, at).unwrap().unwrap();
        assert!(!Expect::Ok.holds(&err, &wire) && !Expect::Integer.holds(&err, &wire));
    }

    #[test]
    fn replies_parse_whole_or_not_at_all() {
        let wire = b"$3\r\nabc\r\n*2\r\n$1\r\nx\r\n$-1\r\n-ERR no\r\n";
        let (Parsed::Values(v), n) = parse_reply(wire, 0).unwrap().unwrap() else { panic!() };
        assert_eq!((v, n), (vec![Some((4, 7))], 9));
        let (Parsed::Values(v), m) = parse_reply(wire, 9).unwrap().unwrap() else { panic!() };
        assert_eq!(v, vec![Some((17, 18)), None]);
        let (Parsed::Line(a, b), _) = parse_reply(wire, m).unwrap().unwrap() else { panic!() };
        assert_eq!(&wire[a..b], b"-ERR no");
        for cut in 0..9 {
            assert!(parse_reply(&wire[..cut], 0).unwrap().is_none(), "{cut}");
        }
        for cut in 9..m {
            assert!(parse_reply(&wire[..cut], 9).unwrap().is_none(), "{cut}");
        }
    }
}
