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
//! YCSB's scrambled Zipfian.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use cornflakes_workloads::{check_value, fill_value, Transaction, Workload, WorkloadSpec};
use hdrhistogram::Histogram;
use rand::{rngs::SmallRng, SeedableRng};
use rand_distr::{Distribution, Exp};

use crate::Error;

/// The YCSB requests of the paper's Redis experiment (Table 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum YcsbOp {
    /// `GET key`: one value.
    Get,
    /// `MGET key1 key2`: two values.
    Mget2,
    /// `LRANGE l:key 0 -1`: a list of two values.
    Lrange2,
}

impl YcsbOp {
    /// All three, in table order.
    pub const ALL: [YcsbOp; 3] = [YcsbOp::Get, YcsbOp::Mget2, YcsbOp::Lrange2];

    /// The name in results.
    pub fn name(self) -> &'static str {
        match self {
            YcsbOp::Get => "get",
            YcsbOp::Mget2 => "mget-2",
            YcsbOp::Lrange2 => "lrange-2",
        }
    }
}

/// One load point.
#[derive(Clone, Debug)]
pub struct RespLoadConfig {
    /// The server.
    pub addr: SocketAddr,
    /// Request type.
    pub op: YcsbOp,
    /// Keys (each a plain value and a two-element list `l:<key>`).
    pub keys: u32,
    /// Bytes of each value (and list element).
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
/// for a nil), or an error / other reply.
enum Parsed {
    Values(Vec<Option<(usize, usize)>>),
    Other,
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
        _ => Ok(Some((Parsed::Other, next))),
    }
}

struct Pending {
    arrival: Instant,
    keys: [u32; 2],
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
    let w = workload(cfg.keys, cfg.size)?;
    let mut gen = w.generator(cfg.seed.wrapping_add(thread as u64 * 7919));
    let mut rng = SmallRng::seed_from_u64(cfg.seed ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9));
    let gap = Exp::new(cfg.rate / cfg.threads as f64).map_err(|e| Error::Invalid(format!("rate: {e}")))?;
    let mut s = TcpStream::connect(cfg.addr).map_err(|e| format!("cannot connect to {}: {e}", cfg.addr))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut hist = Histogram::<u64>::new(3).expect("histogram");
    let (mut errors, mut txn, mut key) = (0u64, Transaction::default(), Vec::new());
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
            let mut keys = [0u32; 2];
            let n = if cfg.op == YcsbOp::Mget2 { 2 } else { 1 };
            for k in keys.iter_mut().take(n) {
                gen.next(&mut txn);
                *k = txn.requests[0].keys[0];
            }
            match cfg.op {
                YcsbOp::Get => {
                    w.key(keys[0], &mut key);
                    out.extend_from_slice(b"*2\r\n");
                    push_bulk(&mut out, b"GET");
                    push_bulk(&mut out, &key);
                }
                YcsbOp::Mget2 => {
                    out.extend_from_slice(b"*3\r\n");
                    push_bulk(&mut out, b"MGET");
                    for &k in &keys {
                        w.key(k, &mut key);
                        push_bulk(&mut out, &key);
                    }
                }
                YcsbOp::Lrange2 => {
                    w.key(keys[0], &mut key);
                    if !cfg.lists_at_keys {
                        key.splice(0..0, *b"l:");
                    }
                    out.extend_from_slice(b"*4\r\n");
                    push_bulk(&mut out, b"LRANGE");
                    push_bulk(&mut out, &key);
                    push_bulk(&mut out, b"0");
                    push_bulk(&mut out, b"-1");
                }
            }
            pending.push_back(Pending { arrival: next, keys });
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
            let ok = match (cfg.op, parsed) {
                (YcsbOp::Get, Parsed::Values(v)) if v.len() == 1 => {
                    v[0].is_some_and(|(a, b)| check_value(p.keys[0], 0, cfg.size, &inbuf[a..b]))
                }
                (YcsbOp::Mget2, Parsed::Values(v)) if v.len() == 2 => {
                    v.iter().zip(p.keys).all(|(r, k)| r.is_some_and(|(a, b)| check_value(k, 0, cfg.size, &inbuf[a..b])))
                }
                (YcsbOp::Lrange2, Parsed::Values(v)) if v.len() == 2 => v
                    .iter()
                    .enumerate()
                    .all(|(e, r)| r.is_some_and(|(a, b)| check_value(p.keys[0], e as u32, cfg.size, &inbuf[a..b]))),
                _ => false,
            };
            in_at = used;
            let now = Instant::now();
            if p.arrival >= record_from && p.arrival < end {
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
    let unanswered = pending.iter().filter(|p| p.arrival >= record_from && p.arrival < end).count() as u64;
    Ok((hist, errors, unanswered))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_whole_or_not_at_all() {
        let wire = b"$3\r\nabc\r\n*2\r\n$1\r\nx\r\n$-1\r\n-ERR no\r\n";
        let (Parsed::Values(v), n) = parse_reply(wire, 0).unwrap().unwrap() else { panic!() };
        assert_eq!((v, n), (vec![Some((4, 7))], 9));
        let (Parsed::Values(v), m) = parse_reply(wire, 9).unwrap().unwrap() else { panic!() };
        assert_eq!(v, vec![Some((17, 18)), None]);
        assert!(matches!(parse_reply(wire, m).unwrap(), Some((Parsed::Other, _))));
        for cut in 0..9 {
            assert!(parse_reply(&wire[..cut], 0).unwrap().is_none(), "{cut}");
        }
        for cut in 9..m {
            assert!(parse_reply(&wire[..cut], 9).unwrap().is_none(), "{cut}");
        }
    }
}
