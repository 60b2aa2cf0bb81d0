//! Blocking pops, as Redis 7.0 has them: BLPOP BRPOP BLMOVE BRPOPLPUSH
//! BLMPOP BZPOPMIN BZPOPMAX BZMPOP (and LMPOP and ZMPOP, the forms of
//! BLMPOP and BZMPOP that do not wait), with CLIENT UNBLOCK.
//!
//! A blocking command that finds nothing to pop leaves its connection
//! waiting on its keys: the connection's further input waits unread, as in
//! Redis. A command that writes a key someone waits on marks the key ready;
//! the serving loop then asks [`RespDb::take_woken`] for the clients served,
//! after that command and before the next one (Redis serves blocked clients
//! after each command too), in the order they blocked, each from the key
//! that became ready. A client whose time is up gets the null array; one
//! CLIENT UNBLOCK names gets the null array or Redis's `UNBLOCKED` error.
//! Inside MULTI a blocking command does not wait: it answers what the
//! non-blocking command would (the null array, or BLMOVE's null).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use cornflakes::RcBuf;
use cornflakes_resp::Reply;
use hashbrown::{HashMap, HashSet};

use super::list::side;
use super::long_double::LongDouble;
use super::zset::format_score;
use super::{arity_error, integer_arg, After, Kind, RespDb, Session, SYNTAX, WRONGTYPE};

/// What a blocked client does once a key it waits on holds something.
#[derive(Clone, Debug)]
enum Op {
    /// BLPOP, BRPOP: one element, answered `[key, element]`.
    Pop { left: bool },
    /// BLMPOP: up to `count` elements, answered `[key, [elements]]`.
    MPop { left: bool, count: usize },
    /// BLMOVE, BRPOPLPUSH: one element moved to `dst`, answered as the element.
    Move { dst: Box<[u8]>, from_left: bool, to_left: bool },
    /// BZPOPMIN, BZPOPMAX: one member, answered `[key, member, score]`.
    ZPop { min: bool },
    /// BZMPOP: up to `count` members, answered `[key, [[member, score]..]]`.
    ZMPop { min: bool, count: usize },
}

impl Op {
    fn kind(&self) -> Kind {
        match self {
            Op::ZPop { .. } | Op::ZMPop { .. } => Kind::ZSet,
            _ => Kind::List,
        }
    }
}

/// A client waiting on keys.
#[derive(Debug)]
struct Blocked {
    /// When it blocked, in the order clients did (its place in the queue
    /// of each of its keys).
    seq: u64,
    /// The database its keys are in.
    db: usize,
    keys: Vec<Box<[u8]>>,
    op: Op,
    /// When it gets the null array (`None`: never).
    deadline: Option<Instant>,
    /// The command as sent (its line of the command table, its words),
    /// counted and slow-logged when it is answered.
    command: (usize, Vec<Vec<u8>>),
}

/// The clients waiting on one key: connection ids by their `seq`.
type Queue = BTreeMap<u64, u64>;

/// Every blocked client, by key, by connection and by deadline; the keys
/// made ready since the serving loop last asked; the replies decided
/// elsewhere (CLIENT UNBLOCK).
#[derive(Debug, Default)]
pub(super) struct Blocking {
    /// Per key, its clients by when they blocked (so that one leaves in
    /// O(log n), however many wait).
    by_key: HashMap<(usize, Box<[u8]>), Queue>,
    /// The next client's `seq`.
    next_seq: u64,
    by_session: HashMap<u64, Blocked>,
    deadlines: BTreeSet<(Instant, u64)>,
    /// Keys a write touched while someone waits on them, in the order
    /// they were touched (each once).
    ready: Vec<(usize, Box<[u8]>)>,
    ready_set: HashSet<(usize, Box<[u8]>)>,
    /// Clients unblocked by CLIENT UNBLOCK, with their replies.
    kicked: Vec<(u64, Reply<RcBuf>)>,
}

impl Blocking {
    /// Whether no client is blocked.
    pub(super) fn is_empty(&self) -> bool {
        self.by_session.is_empty()
    }

    /// Marks `key` of database `db` ready if a client waits on it.
    pub(super) fn signal(&mut self, db: usize, key: &[u8]) {
        let k = (db, Box::<[u8]>::from(key));
        if self.by_key.contains_key(&k) && self.ready_set.insert(k.clone()) {
            self.ready.push(k);
        }
    }

    /// Marks every key a client waits on ready (SWAPDB, MOVE, COPY: keys
    /// of another database changed).
    pub(super) fn signal_all(&mut self) {
        let keys: Vec<_> = self.by_key.keys().cloned().collect();
        for (db, key) in keys {
            self.signal(db, &key);
        }
    }

    fn block(&mut self, id: u64, mut blocked: Blocked) {
        blocked.seq = self.next_seq;
        self.next_seq += 1;
        for key in &blocked.keys {
            // A key named twice (BLPOP k k 0) waits once.
            self.by_key.entry((blocked.db, key.clone())).or_default().insert(blocked.seq, id);
        }
        if let Some(at) = blocked.deadline {
            self.deadlines.insert((at, id));
        }
        self.by_session.insert(id, blocked);
    }

    /// Takes client `id` off every key it waits on; what it waited for.
    fn unblock(&mut self, id: u64) -> Option<Blocked> {
        let blocked = self.by_session.remove(&id)?;
        for key in &blocked.keys {
            let k = (blocked.db, key.clone());
            if let Some(waiting) = self.by_key.get_mut(&k) {
                waiting.remove(&blocked.seq);
                if waiting.is_empty() {
                    self.by_key.remove(&k);
                }
            }
        }
        if let Some(at) = blocked.deadline {
            self.deadlines.remove(&(at, id));
        }
        Some(blocked)
    }
}

/// The commands of this module, for the dispatcher.
pub(super) const BLOCKING_COMMANDS: &[&str] =
    &["blpop", "brpop", "blmove", "brpoplpush", "blmpop", "lmpop", "bzpopmin", "bzpopmax", "bzmpop", "zmpop"];

/// LMPOP's arguments after `numkeys`: the keys, whether from the left, and
/// the count.
type MPop<'c, 'a> = (&'c [Cow<'a, [u8]>], bool, usize);

/// Redis's `timeout` argument in seconds (a float, read and rounded up
/// to whole milliseconds in `long double`, as Redis 7.0 does): `Ok(None)`
/// for 0 (wait for ever); past `i64` milliseconds (and infinity) is what
/// Redis's conversion makes it, a negative timeout.
fn timeout(arg: &[u8]) -> Result<Option<Duration>, &'static str> {
    let secs = LongDouble::parse(arg).ok_or("ERR timeout is not a float or out of range")?;
    match secs.ceil_millis() {
        Some(0) => Ok(None),
        Some(ms) if ms > 0 => Ok(Some(Duration::from_millis(ms as u64))),
        _ => Err("ERR timeout is negative"),
    }
}

/// LMPOP's `numkeys key [key ...] LEFT|RIGHT [COUNT count]` (ZMPOP's with
/// MIN|MAX, which `side` reads): the keys, the side and the count.
fn mpop_args<'c, 'a>(args: &'c [Cow<'a, [u8]>], side: fn(&[u8]) -> Option<bool>) -> Result<MPop<'c, 'a>, &'static str> {
    let n = integer_arg(&args[0]).filter(|&n| n > 0).ok_or("ERR numkeys should be greater than 0")?;
    let n = usize::try_from(n).map_err(|_| SYNTAX)?;
    let rest = args.get(1..).unwrap_or_default();
    if n >= rest.len() {
        return Err(SYNTAX);
    }
    let (keys, rest) = rest.split_at(n);
    let left = side(&rest[0]).ok_or(SYNTAX)?;
    let count = match &rest[1..] {
        [] => 1,
        [opt, n] if opt.eq_ignore_ascii_case(b"count") => integer_arg(n)
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or("ERR count should be greater than 0")?,
        _ => return Err(SYNTAX),
    };
    Ok((keys, left, count))
}

impl RespDb {
    /// Runs blocking command `name` (its arity checked): serves it at once
    /// when a key holds something, else blocks `session` (or, inside
    /// MULTI, answers the null array).
    pub(super) fn blocking_command(
        &mut self,
        name: &str,
        cmd_args: &[Cow<'_, [u8]>],
        session: &Session,
        reply: &mut Reply<RcBuf>,
    ) -> After {
        let args = &cmd_args[1..];
        // The arguments, checked in Redis's order: the timeout first for
        // BLPOP, after the sides for BLMOVE, last for BLMPOP.
        let parsed = match name {
            "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
                let (keys, t) = args.split_at(args.len() - 1);
                let op = match name {
                    "blpop" | "brpop" => Op::Pop { left: name == "blpop" },
                    _ => Op::ZPop { min: name == "bzpopmin" },
                };
                timeout(&t[0]).map(|t| (keys, op, t))
            }
            "brpoplpush" => timeout(&args[2])
                .map(|t| (&args[..1], Op::Move { dst: args[1][..].into(), from_left: false, to_left: true }, t)),
            "blmove" => match (side(&args[2]), side(&args[3])) {
                (Some(from_left), Some(to_left)) => {
                    timeout(&args[4]).map(|t| (&args[..1], Op::Move { dst: args[1][..].into(), from_left, to_left }, t))
                }
                _ => Err(SYNTAX),
            },
            // The timeout after the rest, as Redis 7.0 checks them.
            "blmpop" | "lmpop" | "bzmpop" | "zmpop" => {
                let blocks = name.starts_with('b');
                let rest = if blocks { &args[1..] } else { args };
                let parsed = if name.ends_with("zmpop") {
                    mpop_args(rest, min_or_max).map(|(keys, min, count)| (keys, Op::ZMPop { min, count }))
                } else {
                    mpop_args(rest, side).map(|(keys, left, count)| (keys, Op::MPop { left, count }))
                };
                parsed.and_then(|(keys, op)| Ok((keys, op, if blocks { timeout(&args[0])? } else { None })))
            }
            _ => unreachable!("not a blocking command: {name}"),
        };
        let (keys, op, wait) = match parsed {
            Ok(p) => p,
            Err(e) => return error(reply, e),
        };
        // The first key that holds something serves it; one of another
        // kind is an error, as in Redis (keys after it are not looked at).
        for key in keys {
            match self.kind(key) {
                None => {}
                Some(k) if k == op.kind() => {
                    self.serve(key, &op, reply);
                    return After::Continue;
                }
                Some(_) => return error(reply, WRONGTYPE),
            }
        }
        // Nothing to pop: LMPOP and commands inside MULTI do not wait.
        // (What LMOVE would answer for BLMOVE; a timeout is the null
        // array for every command, as in Redis.)
        if matches!(name, "lmpop" | "zmpop") || self.in_exec || session.multi.is_some() {
            match op {
                Op::Move { .. } => reply.null(),
                _ => reply.null_array(),
            }
            return After::Continue;
        }
        let deadline = wait.map(|w| Instant::now().checked_add(w).unwrap_or_else(far_future));
        let keys = keys.iter().map(|k| k[..].into()).collect();
        let command = (super::command_index(name).unwrap_or_default(), cmd_args.iter().map(|a| a.to_vec()).collect());
        let blocked = Blocked { seq: 0, db: self.db, keys, op, deadline, command };
        self.blocking.block(session.id, blocked);
        After::Block
    }

    /// Pops for `op` from `key`, which holds a non-empty value of `op`'s
    /// kind, writing the blocking command's reply.
    fn serve(&mut self, key: &[u8], op: &Op, reply: &mut Reply<RcBuf>) {
        match op {
            Op::Pop { left } => {
                let Some(v) = self.store.pop(key, *left) else { return reply.null_array() };
                reply.array(2);
                reply.bulk(key);
                self.value(reply, &v);
                self.settle_after_pop(key);
            }
            Op::MPop { left, count } => {
                let n = (*count).min(self.store.get(key).map_or(0, |l| l.len()));
                reply.array(2);
                reply.bulk(key);
                reply.array(n);
                for _ in 0..n {
                    if let Some(v) = self.store.pop(key, *left) {
                        self.value(reply, &v);
                    }
                }
                self.settle_after_pop(key);
            }
            Op::Move { dst, from_left, to_left } => {
                self.lmove(key, dst, *from_left, *to_left, reply);
                // The destination may be what someone else waits on.
                self.blocking.signal(self.db, dst);
            }
            Op::ZPop { min } => {
                let Some((member, score)) = self.zpop_one(key, *min) else { return reply.null_array() };
                reply.array(3);
                reply.bulk(key);
                reply.bulk(&member);
                reply.bulk(format_score(score).as_bytes());
            }
            Op::ZMPop { min, count } => {
                let n = (*count).min(self.store.zset(key).map_or(0, |z| z.len()));
                reply.array(2);
                reply.bulk(key);
                reply.array(n);
                for _ in 0..n {
                    let Some((member, score)) = self.zpop_one(key, *min) else { break };
                    reply.array(2);
                    reply.bulk(&member);
                    reply.bulk(format_score(score).as_bytes());
                }
            }
        }
    }

    /// Pops the member of the lowest (`min`) or highest score of the
    /// sorted set of `key`, deleting the key with its last member.
    fn zpop_one(&mut self, key: &[u8], min: bool) -> Option<(Box<[u8]>, f64)> {
        let popped = self.store.zset(key).and_then(|z| {
            let at = if min { 0 } else { z.len().checked_sub(1)? };
            z.get_index(at).map(|(m, s)| (Box::<[u8]>::from(m), s))
        })?;
        self.store.zset_remove(key, &popped.0);
        if self.store.zset(key).is_none() {
            self.delete(key);
        }
        Some(popped)
    }

    /// After a pop from the list of `key`: the key goes with its last
    /// element.
    fn settle_after_pop(&mut self, key: &[u8]) {
        if self.store.get(key).is_none() {
            self.delete(key);
        }
    }

    /// Whether connection `id` is blocked (its input waits).
    pub fn is_blocked(&self, id: u64) -> bool {
        !self.blocking.is_empty() && self.blocking.by_session.contains_key(&id)
    }

    /// Whether a key someone waits on was written, or CLIENT UNBLOCK named
    /// a client, since the last [`take_woken`](Self::take_woken).
    pub fn has_ready(&self) -> bool {
        !self.blocking.ready.is_empty() || !self.blocking.kicked.is_empty()
    }

    /// Whether [`take_woken`](Self::take_woken) has something to do now:
    /// a key made ready, a client unblocked, or a deadline passed.
    pub fn has_woken(&self, now: Instant) -> bool {
        self.has_ready() || self.blocking.deadlines.first().is_some_and(|&(at, _)| at <= now)
    }

    /// When the first blocked client's time is up, if any has a deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.blocking.deadlines.first().map(|&(at, _)| at)
    }

    /// The clients unblocked since the last call, each with its reply (by
    /// connection id, [`Session::id`]), in the order Redis would answer
    /// them: those CLIENT UNBLOCK named, those served by the keys made
    /// ready (each key's clients in the order they blocked, while it
    /// holds something), then those whose time is up at `now`.
    pub fn take_woken(&mut self, now: Instant) -> Vec<(u64, Reply<RcBuf>)> {
        let mut woken = std::mem::take(&mut self.blocking.kicked);
        let back = self.db;
        // Serving may make more keys ready (BLMOVE's destination).
        while !self.blocking.ready.is_empty() {
            let ready = std::mem::take(&mut self.blocking.ready);
            for (db, key) in ready {
                self.blocking.ready_set.remove(&(db, key.clone()));
                self.use_db(db);
                self.serve_waiting(db, &key, &mut woken);
            }
        }
        self.use_db(back);
        while let Some(&(at, id)) = self.blocking.deadlines.first() {
            if at > now {
                break;
            }
            let blocked = self.blocking.unblock(id);
            let mut reply = Reply::new(self.threshold);
            reply.null_array();
            if let Some(b) = blocked {
                self.count_served(id, &b.command, Duration::ZERO, &reply);
            }
            woken.push((id, reply));
        }
        woken
    }

    /// Serves the clients waiting on `key` (of the current database `db`)
    /// in the order they blocked, while it holds something: those that
    /// wait for its kind (a list or a sorted set); the others wait on, as
    /// in Redis.
    fn serve_waiting(&mut self, db: usize, key: &[u8], woken: &mut Vec<(u64, Reply<RcBuf>)>) {
        let k = (db, Box::<[u8]>::from(key));
        // From the first waiter on: serving one takes it off the queue, and
        // a BLMOVE into this key keeps it filled.
        let mut after = None;
        loop {
            let Some(kind) = self.kind(key) else { return };
            let Some(waiting) = self.blocking.by_key.get(&k) else { return };
            let next = match after {
                None => waiting.iter().next(),
                Some(seq) => waiting.range(seq + 1..).next(),
            };
            let Some((&seq, &id)) = next else { return };
            after = Some(seq);
            let Some(op) = self.blocking.by_session.get(&id).map(|b| b.op.clone()) else { return };
            if op.kind() != kind {
                continue;
            }
            let mut reply = Reply::new(self.threshold);
            if let Op::Move { dst, .. } = &op {
                // Redis answers a destination of another kind with the
                // error, and the element stays.
                if self.kind(dst).is_some_and(|k| k != Kind::List) {
                    reply.error(WRONGTYPE);
                    if let Some(b) = self.blocking.unblock(id) {
                        self.count_served(id, &b.command, Duration::ZERO, &reply);
                    }
                    woken.push((id, reply));
                    continue;
                }
            }
            let started = Instant::now();
            self.serve(key, &op, &mut reply);
            let took = started.elapsed();
            self.watchers.touched(key);
            if let Op::Move { dst, .. } = &op {
                self.watchers.touched(dst);
            }
            if let Some(b) = self.blocking.unblock(id) {
                self.count_served(id, &b.command, took, &reply);
            }
            woken.push((id, reply));
        }
    }

    /// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`.
    pub(super) fn client_unblock(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        if args.len() < 2 {
            return reply.error(&arity_error("client|unblock"));
        }
        if args.len() > 3 {
            return reply.error(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                super::lossy(&args[0])
            ));
        }
        let error = match args.get(2) {
            None => false,
            Some(how) if how.eq_ignore_ascii_case(b"timeout") => false,
            Some(how) if how.eq_ignore_ascii_case(b"error") => true,
            Some(_) => return reply.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
        };
        let Some(id) = args.get(1).and_then(|a| integer_arg(a)) else {
            return reply.error(super::NOT_INTEGER);
        };
        let Some(blocked) = u64::try_from(id).ok().and_then(|id| self.blocking.unblock(id)) else {
            return reply.integer(0);
        };
        let mut answer = Reply::new(self.threshold);
        if error {
            answer.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
        } else {
            answer.null_array();
        }
        self.count_served(id as u64, &blocked.command, Duration::ZERO, &answer);
        self.blocking.kicked.push((id as u64, answer));
        reply.integer(1);
    }

    /// Forgets what connection `id` waited on (it has gone).
    pub(super) fn end_blocking(&mut self, id: u64) {
        if !self.blocking.is_empty() {
            self.blocking.unblock(id);
        }
    }

    /// Clients blocked now (INFO's `blocked_clients`).
    pub(super) fn blocked_clients(&self) -> usize {
        self.blocking.by_session.len()
    }

    /// Blocked clients with a timeout (INFO's `clients_in_timeout_table`).
    pub(super) fn blocked_with_timeout(&self) -> usize {
        self.blocking.deadlines.len()
    }
}

/// MIN or MAX (any case): whether MIN.
fn min_or_max(arg: &[u8]) -> Option<bool> {
    if arg.eq_ignore_ascii_case(b"min") {
        Some(true)
    } else if arg.eq_ignore_ascii_case(b"max") {
        Some(false)
    } else {
        None
    }
}

fn error(reply: &mut Reply<RcBuf>, e: &str) -> After {
    reply.error(e);
    After::Continue
}

/// A deadline past any wait (a timeout `Instant` cannot hold).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(1 << 40)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use cornflakes::Pool;
    use cornflakes_resp::{parse_command, Limits};
    use proptest::prelude::*;

    use super::*;
    use crate::resp::resp_limits;
    use crate::Store;

    /// What a connection does (a blocked one does nothing until woken).
    #[derive(Clone, Debug)]
    enum Step {
        /// `RPUSH key v` (or, `z`, `ZADD key v v`) by connection `by`.
        Push { by: usize, key: usize, z: bool },
        /// `BLPOP keys.. 0` (or, `z`, `BZPOPMIN keys.. 0`) by connection `by`.
        Wait { by: usize, keys: Vec<usize>, z: bool },
        /// Connection `by` goes away.
        Leave { by: usize },
        /// `CLIENT UNBLOCK` of connection `who`, by connection `by`.
        Unblock { by: usize, who: usize },
    }

    const CONNS: usize = 4;
    const KEYS: [&str; 3] = ["a", "b", "c"];

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0..CONNS, 0..KEYS.len(), proptest::bool::weighted(0.3)).prop_map(|(by, key, z)| Step::Push { by, key, z }),
            3 => (0..CONNS, proptest::collection::vec(0..KEYS.len(), 1..3), proptest::bool::weighted(0.3))
                .prop_map(|(by, keys, z)| Step::Wait { by, keys, z }),
            1 => (0..CONNS).prop_map(|by| Step::Leave { by }),
            1 => (0..CONNS, 0..CONNS).prop_map(|(by, who)| Step::Unblock { by, who }),
        ]
    }

    fn exec(db: &mut RespDb, session: &mut Session, line: &str) -> (After, String) {
        let line = format!("{line}\r\n");
        let (cmd, _) = parse_command(line.as_bytes(), &Limits::default()).unwrap().unwrap();
        let mut reply = Reply::new(db.threshold());
        let after = db.execute(&cmd, session, &mut reply);
        (after, String::from_utf8(reply.to_vec()).unwrap())
    }

    /// BLPOP's answer (or, `z`, BZPOPMIN's: the member and its score are
    /// both `v`).
    fn popped(key: &str, v: u32, z: bool) -> String {
        let v = v.to_string();
        let head = format!("${}\r\n{key}\r\n${}\r\n{v}\r\n", key.len(), v.len());
        if z {
            format!("*3\r\n{head}${}\r\n{v}\r\n", v.len())
        } else {
            format!("*2\r\n{head}")
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

        /// Pushes to lists and sorted sets, blocking pops of both kinds over
        /// several keys, connections leaving and CLIENT UNBLOCK give the
        /// answers of a model that serves each pushed key's waiters of that
        /// kind in the order they blocked (passing over waiters of the other
        /// kind, as Redis does): every element is popped once or stays,
        /// never lost or given twice.
        #[test]
        fn waiters_are_served_as_a_fifo_model_says(steps in proptest::collection::vec(step(), 1..60)) {
            let mut db = RespDb::new(Store::new(Pool::new().unwrap(), resp_limits()), 512);
            let mut next_id = 1;
            let mut sessions: Vec<Session> = (0..CONNS).map(|_| { next_id += 1; db.new_session(next_id - 1) }).collect();
            // The model: per key its elements (oldest first: a sorted set's
            // scores grow with them) and whether it is a sorted set; per key
            // the connections waiting, in order; per connection the keys it
            // waits on and whether for a sorted set.
            let mut items: Vec<VecDeque<u32>> = vec![VecDeque::new(); KEYS.len()];
            let mut is_z = [false; KEYS.len()];
            let mut waiting: Vec<VecDeque<usize>> = vec![VecDeque::new(); KEYS.len()];
            let mut blocked: Vec<Option<(Vec<usize>, bool)>> = vec![None; CONNS];
            let mut value = 0u32;
            for step in steps {
                let mut expect: Vec<(u64, String)> = Vec::new();
                match step {
                    Step::Push { by, key, z } if blocked[by].is_none() => {
                        value += 1;
                        let line = if z { format!("ZADD {} {value} {value}", KEYS[key]) } else { format!("RPUSH {} {value}", KEYS[key]) };
                        let (_, r) = exec(&mut db, &mut sessions[by], &line);
                        if !items[key].is_empty() && is_z[key] != z {
                            prop_assert!(r.starts_with("-WRONGTYPE"), "{}", r);
                            continue;
                        }
                        is_z[key] = z;
                        items[key].push_back(value);
                        prop_assert_eq!(r, if z { ":1\r\n".to_owned() } else { format!(":{}\r\n", items[key].len()) });
                        let mut i = 0;
                        while let (Some(&who), Some(_)) = (waiting[key].get(i), items[key].front()) {
                            if blocked[who].as_ref().is_some_and(|&(_, wz)| wz != z) {
                                i += 1;
                                continue;
                            }
                            let v = items[key].pop_front().unwrap();
                            expect.push((sessions[who].id, popped(KEYS[key], v, z)));
                            for k in blocked[who].take().unwrap().0 {
                                waiting[k].retain(|&w| w != who);
                            }
                        }
                    }
                    Step::Wait { by, keys, z } if blocked[by].is_none() => {
                        let names: Vec<&str> = keys.iter().map(|&k| KEYS[k]).collect();
                        let name = if z { "BZPOPMIN" } else { "BLPOP" };
                        let (after, r) = exec(&mut db, &mut sessions[by], &format!("{name} {} 0", names.join(" ")));
                        match keys.iter().find(|&&k| !items[k].is_empty()) {
                            Some(&k) if is_z[k] != z => {
                                prop_assert_eq!(after, After::Continue);
                                prop_assert!(r.starts_with("-WRONGTYPE"), "{}", r);
                            }
                            Some(&k) => {
                                let v = items[k].pop_front().unwrap();
                                prop_assert_eq!(after, After::Continue);
                                prop_assert_eq!(r, popped(KEYS[k], v, z));
                            }
                            None => {
                                prop_assert_eq!(after, After::Block);
                                prop_assert_eq!(r, "");
                                for &k in &keys {
                                    if !waiting[k].contains(&by) {
                                        waiting[k].push_back(by);
                                    }
                                }
                                blocked[by] = Some((keys, z));
                            }
                        }
                    }
                    Step::Leave { by } => {
                        db.end_session(sessions[by].id);
                        if let Some((keys, _)) = blocked[by].take() {
                            for k in keys {
                                waiting[k].retain(|&w| w != by);
                            }
                        }
                        next_id += 1;
                        sessions[by] = db.new_session(next_id - 1);
                    }
                    Step::Unblock { by, who } if blocked[by].is_none() => {
                        let line = format!("CLIENT UNBLOCK {}", sessions[who].id);
                        let (_, r) = exec(&mut db, &mut sessions[by], &line);
                        match blocked[who].take() {
                            Some((keys, _)) => {
                                prop_assert_eq!(r, ":1\r\n");
                                for k in keys {
                                    waiting[k].retain(|&w| w != who);
                                }
                                expect.push((sessions[who].id, "*-1\r\n".to_owned()));
                            }
                            None => prop_assert_eq!(r, ":0\r\n"),
                        }
                    }
                    _ => continue,
                }
                let woken: Vec<(u64, String)> = db
                    .take_woken(Instant::now())
                    .into_iter()
                    .map(|(id, r)| (id, String::from_utf8(r.to_vec()).unwrap()))
                    .collect();
                prop_assert_eq!(woken, expect);
                prop_assert_eq!(db.blocked_clients(), blocked.iter().flatten().count());
                for (k, list) in items.iter().enumerate() {
                    let key = KEYS[k].as_bytes();
                    let len = db.store().get(key).map_or(0, |l| l.len()) + db.store().zset(key).map_or(0, |z| z.len());
                    prop_assert_eq!(len, list.len());
                }
            }
        }
    }

    #[test]
    fn timeouts_parse_as_redis_7_0_does() {
        assert_eq!(timeout(b"0"), Ok(None));
        assert_eq!(timeout(b"-0"), Ok(None));
        assert_eq!(timeout(b"1.5"), Ok(Some(Duration::from_millis(1500))));
        // Rounded up to whole milliseconds: a tiny timeout still times out.
        assert_eq!(timeout(b"0.0001"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(timeout(b"-1"), Err("ERR timeout is negative"));
        assert_eq!(timeout(b"inf"), Err("ERR timeout is negative"));
        assert_eq!(timeout(b"9999999999999999"), Err("ERR timeout is negative"));
        // Far, but within i64 milliseconds in `long double`: waits.
        assert!(timeout(b"9223372036854775").unwrap().is_some());
        assert_eq!(timeout(b"9223372036854776"), Err("ERR timeout is negative"));
        // strtold reads hexadecimal, and Redis with it.
        assert_eq!(timeout(b"0x10"), Ok(Some(Duration::from_secs(16))));
        assert_eq!(timeout(b"-0.0001"), Ok(None));
        for bad in [&b"x"[..], b"", b" 1", b"nan", b"1.5abc", b"\xff"] {
            assert_eq!(timeout(bad), Err("ERR timeout is not a float or out of range"), "{bad:?}");
        }
    }
}
