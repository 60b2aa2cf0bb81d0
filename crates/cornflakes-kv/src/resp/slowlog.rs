//! What the commands cost, as Redis 7.0 reports it: INFO `commandstats`
//! (`cmdstat_get:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..`,
//! container commands by subcommand, `cmdstat_config|get`), INFO
//! `errorstats` (`errorstat_WRONGTYPE:count=..`) with `total_error_replies`,
//! and SLOWLOG GET/LEN/RESET/HELP with `slowlog-log-slower-than` and
//! `slowlog-max-len`.
//!
//! As in Redis: a call is counted when the command runs (refused before
//! it runs, by arity, NOAUTH, OOM or a transaction's rules: a *rejected*
//! call; ran and answered an error: a *failed* one); its time is the time
//! it ran, EXEC's including the commands it ran, which are counted each
//! on their own; a command that blocks is counted when it is served.
//! EXEC is not put in the slow log (its commands are), and passwords are
//! shown as `(redacted)` there, as in MONITOR.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cornflakes::RcBuf;
use cornflakes_resp::Reply;

use super::{arity_error, help_reply, integer_arg, unknown_subcommand, RespDb, COMMANDS};

/// Distinct error codes `errorstats` tracks (Redis's limit: past it, new
/// codes are counted in `total_error_replies` only).
const MAX_ERROR_CODES: usize = 128;

/// Distinct `name|subcommand` lines `commandstats` keeps.
const MAX_SUBCOMMANDS: usize = 256;

/// Arguments of a slow-log entry, and bytes of each, as Redis keeps them.
const SLOWLOG_ARGS: usize = 32;
const SLOWLOG_ARG_BYTES: usize = 128;

/// Times each command: the CPU's time-stamp counter where it is usable
/// (`quanta`; a read costs a third of `Instant::now`'s on this project's
/// machines, which made timing every command cost 5-15 % of SET/INCR/LPUSH
/// throughput), else the OS's monotonic clock. Under Miri, which cannot
/// run `cpuid` or `rdtsc`, `Instant`.
pub(super) struct CommandClock {
    #[cfg(not(miri))]
    clock: quanta::Clock,
}

/// A reading of [`CommandClock`].
#[derive(Clone, Copy)]
pub(super) struct Tick(#[cfg(not(miri))] u64, #[cfg(miri)] std::time::Instant);

impl CommandClock {
    pub(super) fn new() -> Self {
        CommandClock {
            #[cfg(not(miri))]
            clock: quanta::Clock::new(),
        }
    }

    #[inline]
    pub(super) fn now(&self) -> Tick {
        #[cfg(not(miri))]
        return Tick(self.clock.raw());
        #[cfg(miri)]
        return Tick(std::time::Instant::now());
    }

    /// The time from `start` to now.
    #[inline]
    pub(super) fn since(&self, start: Tick) -> Duration {
        #[cfg(not(miri))]
        return self.clock.delta(start.0, self.clock.raw());
        #[cfg(miri)]
        return start.0.elapsed();
    }
}

impl std::fmt::Debug for CommandClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommandClock")
    }
}

/// One line of `commandstats`.
#[derive(Clone, Copy, Debug, Default)]
struct Stat {
    calls: u64,
    time: Duration,
    rejected: u64,
    failed: u64,
}

/// The counts behind `commandstats` and `errorstats`.
#[derive(Debug)]
pub(super) struct CommandStats {
    /// One per line of the command table.
    by_command: Vec<Stat>,
    /// Per line of the command table: whether it is a container, counted
    /// by subcommand (the common case, not one, looked up once).
    container: Vec<bool>,
    /// Container commands (CLIENT, CONFIG, ...) by subcommand.
    by_subcommand: HashMap<String, Stat>,
    by_error: BTreeMap<String, u64>,
    error_replies: u64,
    /// Errors already counted for a command: EXEC's own are what its
    /// commands did not count.
    counted_errors: u64,
}

impl CommandStats {
    pub(super) fn new() -> Self {
        CommandStats {
            by_command: vec![Stat::default(); COMMANDS.len()],
            container: COMMANDS.iter().map(|c| super::clients::CONTAINERS.contains(&c.0)).collect(),
            by_subcommand: HashMap::new(),
            by_error: BTreeMap::new(),
            error_replies: 0,
            counted_errors: 0,
        }
    }

    /// CONFIG RESETSTAT.
    pub(super) fn reset(&mut self) {
        self.by_command.fill(Stat::default());
        self.by_subcommand.clear();
        self.by_error.clear();
        self.error_replies = 0;
    }

    /// Counts the errors a command wrote to `reply` (`new_errors` since it
    /// began) that are its own: not those the commands it ran (EXEC's)
    /// counted since `counted_before`. How many.
    fn count_own_errors(&mut self, new_errors: u64, counted_before: u64, reply: &Reply<RcBuf>) -> u64 {
        let own = new_errors.saturating_sub(self.counted_errors - counted_before);
        self.counted_errors += own;
        self.count_errors(own, reply);
        own
    }

    /// Counts `n` error replies, the last of them `reply`'s last error.
    fn count_errors(&mut self, n: u64, reply: &Reply<RcBuf>) {
        if n == 0 {
            return;
        }
        self.error_replies += n;
        let Some(code) = reply.last_error().and_then(|e| e.split(|&b| b == b' ').next()) else { return };
        let code = String::from_utf8_lossy(code);
        let room = self.by_error.len() < MAX_ERROR_CODES;
        match self.by_error.get_mut(code.as_ref()) {
            Some(count) => *count += n,
            None if room => {
                self.by_error.insert(code.into_owned(), n);
            }
            None => {}
        }
    }

    /// Errors counted so far (see [`Outcome::counted_before`]).
    pub(super) fn counted_before(&self) -> u64 {
        self.counted_errors
    }

    /// `total_error_replies`.
    pub(super) fn error_replies(&self) -> u64 {
        self.error_replies
    }
}

/// The slow log and its settings.
#[derive(Debug)]
pub(super) struct SlowLog {
    entries: VecDeque<SlowEntry>,
    next_id: u64,
    /// `slowlog-log-slower-than` in microseconds (negative: off).
    slower_than_us: i64,
    /// The same, as the time a command must take (`None`: off).
    slower_than: Option<Duration>,
    /// `slowlog-max-len`.
    pub(super) max_len: usize,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            entries: VecDeque::new(),
            next_id: 0,
            slower_than_us: 10_000,
            slower_than: Some(Duration::from_millis(10)),
            max_len: 128,
        }
    }
}

impl SlowLog {
    /// `slowlog-log-slower-than`.
    pub(super) fn slower_than_us(&self) -> i64 {
        self.slower_than_us
    }

    /// Sets `slowlog-log-slower-than` (negative: off).
    pub(super) fn set_slower_than_us(&mut self, us: i64) {
        self.slower_than_us = us;
        self.slower_than = u64::try_from(us).ok().map(Duration::from_micros);
    }

    /// Whether a command that took `time` goes in the log.
    #[inline]
    fn logs(&self, time: Duration) -> bool {
        self.slower_than.is_some_and(|t| time >= t) && self.max_len > 0
    }

    /// `slowlog-max-len`: the oldest entries past it go at once.
    pub(super) fn set_max_len(&mut self, n: usize) {
        self.max_len = n;
        self.entries.truncate(n);
    }
}

#[derive(Debug)]
struct SlowEntry {
    id: u64,
    unix_secs: u64,
    micros: u64,
    args: Vec<Vec<u8>>,
    peer: String,
    name: Vec<u8>,
}

/// How one command went, for [`RespDb::count_command`].
pub(super) struct Outcome<'a> {
    /// Its line of the command table.
    pub index: usize,
    pub args: &'a [Cow<'a, [u8]>],
    /// It ran (passed the checks).
    pub ran: bool,
    /// It blocked: counted when it is served.
    pub blocked: bool,
    pub time: Duration,
    /// Errors written to the reply before it.
    pub errors_before: u64,
    /// [`CommandStats`]'s errors counted before it (those its commands
    /// count while it runs, EXEC's, are theirs).
    pub counted_before: u64,
}

impl RespDb {
    /// Counts a command that `session` sent, once it has answered into
    /// `reply`.
    #[inline]
    pub(super) fn count_command(&mut self, id: u64, client: Option<&[u8]>, how: Outcome<'_>, reply: &Reply<RcBuf>) {
        let stats = &mut self.command_stats;
        let new_errors = reply.errors() - how.errors_before;
        // Most commands: ran, no error, not a container, not slow.
        if new_errors == 0 && how.ran && !how.blocked && !stats.container[how.index] && !self.slowlog.logs(how.time) {
            let stat = &mut stats.by_command[how.index];
            stat.calls += 1;
            stat.time += how.time;
            return;
        }
        self.count_command_slow(id, client, how, reply);
    }

    #[inline(never)]
    fn count_command_slow(&mut self, id: u64, client: Option<&[u8]>, how: Outcome<'_>, reply: &Reply<RcBuf>) {
        let stats = &mut self.command_stats;
        let own_errors = stats.count_own_errors(reply.errors() - how.errors_before, how.counted_before, reply);
        if how.blocked {
            return;
        }
        let name = COMMANDS[how.index].0;
        let stat = match subcommand(name, how.args) {
            None => Some(&mut stats.by_command[how.index]),
            Some(key) => {
                let room = stats.by_subcommand.len() < MAX_SUBCOMMANDS;
                // A subcommand that was refused may be any word: only
                // those that ran without an error make a line.
                if !stats.by_subcommand.contains_key(&key) && room && how.ran && own_errors == 0 {
                    stats.by_subcommand.insert(key.clone(), Stat::default());
                }
                stats.by_subcommand.get_mut(&key)
            }
        };
        let Some(stat) = stat else { return };
        // A subcommand's arity is checked here when it runs, by Redis
        // before: a rejection.
        let arity =
            own_errors > 0 && reply.last_error().is_some_and(|e| e.starts_with(b"ERR wrong number of arguments"));
        if !how.ran || arity {
            stat.rejected += u64::from(own_errors > 0);
            return;
        }
        stat.calls += 1;
        stat.time += how.time;
        stat.failed += u64::from(own_errors > 0);
        if name != "exec" && self.slowlog.logs(how.time) {
            let peer = self.peer_text(id);
            let log = &mut self.slowlog;
            let entry = SlowEntry {
                id: log.next_id,
                unix_secs: SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs(),
                micros: u64::try_from(how.time.as_micros()).unwrap_or(u64::MAX),
                args: slowlog_args(how.args),
                peer,
                name: client.unwrap_or_default().to_vec(),
            };
            log.next_id += 1;
            log.entries.push_front(entry);
            log.entries.truncate(log.max_len);
        }
    }

    /// Counts a command that blocked connection `id` (`command`: its line
    /// of the command table and its words) now that it is answered with
    /// `reply` (served, timed out or unblocked) after `time` of work.
    pub(super) fn count_served(
        &mut self,
        id: u64,
        command: &(usize, Vec<Vec<u8>>),
        time: Duration,
        reply: &Reply<RcBuf>,
    ) {
        let (index, words) = command;
        let args: Vec<Cow<'_, [u8]>> = words.iter().map(|w| Cow::Borrowed(&w[..])).collect();
        let how = Outcome {
            index: *index,
            args: &args,
            ran: true,
            blocked: false,
            time,
            errors_before: 0,
            counted_before: self.command_stats.counted_errors,
        };
        let client = self.client_name(id);
        self.count_command(id, client.as_deref(), how, reply);
    }

    /// Counts the error an unknown command was answered with.
    pub(super) fn count_unknown(&mut self, reply: &Reply<RcBuf>, errors_before: u64, counted_before: u64) {
        self.command_stats.count_own_errors(reply.errors() - errors_before, counted_before, reply);
    }

    /// `SLOWLOG GET [count] | LEN | RESET | HELP`.
    pub(super) fn slowlog(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let sub = args[0].to_ascii_lowercase();
        match (sub.as_slice(), args.len()) {
            (b"get", 1 | 2) => {
                let count = match args.get(1) {
                    None => 10,
                    Some(n) => match integer_arg(n) {
                        Some(-1) => usize::MAX,
                        Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                        _ => return reply.error("ERR count should be greater than or equal to -1"),
                    },
                };
                let shown = count.min(self.slowlog.entries.len());
                reply.array(shown);
                for e in self.slowlog.entries.iter().take(shown) {
                    reply.array(6);
                    reply.integer(e.id as i64);
                    reply.integer(e.unix_secs as i64);
                    reply.integer(e.micros as i64);
                    reply.array(e.args.len());
                    for a in &e.args {
                        reply.bulk(a);
                    }
                    reply.bulk(e.peer.as_bytes());
                    reply.bulk(&e.name);
                }
            }
            (b"len", 1) => reply.integer(self.slowlog.entries.len() as i64),
            (b"reset", 1) => {
                self.slowlog.entries.clear();
                reply.simple("OK");
            }
            (b"help", 1) => {
                let lines = [
                    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "GET [<count>]",
                    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                    "    Entries are made of:",
                    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                    "    client name",
                    "LEN",
                    "    Return the length of the slowlog.",
                    "RESET",
                    "    Reset the slowlog.",
                    "HELP",
                    "    Prints this help.",
                ];
                help_reply(reply, &lines);
            }
            // Redis 7.0's table lets GET have any number of arguments; the
            // command itself then refuses more than one.
            (b"get", _) => reply.error(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                lossy(&args[0])
            )),
            (b"len" | b"reset" | b"help", _) => reply.error(&arity_error(&format!("slowlog|{}", lossy(&sub)))),
            _ => reply.error(&unknown_subcommand("slowlog", &args[0])),
        }
    }

    /// INFO's `commandstats` section.
    pub(super) fn commandstats_info(&self) -> String {
        let mut lines: Vec<(String, Stat)> = Vec::new();
        for (stat, command) in self.command_stats.by_command.iter().zip(COMMANDS) {
            if stat.calls + stat.rejected > 0 {
                lines.push((command.0.to_owned(), *stat));
            }
        }
        lines.extend(self.command_stats.by_subcommand.iter().map(|(k, s)| (k.clone(), *s)));
        lines.retain(|(_, s)| s.calls + s.rejected + s.failed > 0);
        lines.sort_by(|a, b| a.0.cmp(&b.0));
        let mut text = String::from("# Commandstats\r\n");
        for (name, s) in lines {
            let usec = s.time.as_micros();
            let per_call = if s.calls == 0 { 0.0 } else { s.time.as_secs_f64() * 1e6 / s.calls as f64 };
            let _ = write!(
                text,
                "cmdstat_{name}:calls={},usec={usec},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                s.calls, s.rejected, s.failed
            );
        }
        text
    }

    /// INFO's `errorstats` section.
    pub(super) fn errorstats_info(&self) -> String {
        let mut text = String::from("# Errorstats\r\n");
        for (code, n) in &self.command_stats.by_error {
            let _ = write!(text, "errorstat_{code}:count={n}\r\n");
        }
        text
    }
}

/// `name|sub` for a container command whose subcommand is a word.
fn subcommand(name: &str, args: &[Cow<'_, [u8]>]) -> Option<String> {
    if !super::clients::CONTAINERS.contains(&name) {
        return None;
    }
    let sub = args.get(1)?;
    let word = sub.len() <= 32 && sub.iter().all(|b| b.is_ascii_alphabetic() || *b == b'-');
    word.then(|| format!("{name}|{}", String::from_utf8_lossy(&sub.to_ascii_lowercase())))
}

/// A command's arguments as the slow log keeps them: at most 32 (the last
/// says how many more there were), each at most 128 bytes (with how many
/// more), passwords redacted.
fn slowlog_args(args: &[Cow<'_, [u8]>]) -> Vec<Vec<u8>> {
    let name = args.first().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
    let kept = if args.len() > SLOWLOG_ARGS { SLOWLOG_ARGS - 1 } else { args.len() };
    let mut out: Vec<Vec<u8>> = (0..kept)
        .map(|i| {
            let a = &args[i];
            if super::monitor::secret(&name, args, i) {
                b"(redacted)".to_vec()
            } else if a.len() > SLOWLOG_ARG_BYTES {
                let mut t = a[..SLOWLOG_ARG_BYTES].to_vec();
                t.extend_from_slice(format!("... ({} more bytes)", a.len() - SLOWLOG_ARG_BYTES).as_bytes());
                t
            } else {
                a.to_vec()
            }
        })
        .collect();
    if args.len() > SLOWLOG_ARGS {
        out.push(format!("... ({} more arguments)", args.len() - kept).into_bytes());
    }
    out
}

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}
