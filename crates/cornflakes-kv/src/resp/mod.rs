//! A Redis-compatible front end (RESP2) over the same [`Store`] the
//! Cornflakes-format server uses: [`RespDb`] runs one parsed command and
//! writes its reply with the hybrid rule (framing and values below the
//! threshold copied, larger values referenced from the store's pinned
//! buffers); [`serve`] runs the connections of a raw byte-stream datapath.
//!
//! # What is Redis's and what is not
//!
//! Commands: PING ECHO GET SET (EX PX EXAT PXAT NX XX KEEPTTL GET) SETEX
//! PSETEX SETNX GETSET GETDEL GETEX (EX PX EXAT PXAT PERSIST) GETRANGE SUBSTR
//! SETRANGE MGET MSET MSETNX DEL
//! UNLINK EXISTS TOUCH TYPE KEYS RENAME RENAMENX APPEND STRLEN INCR DECR
//! INCRBY DECRBY INCRBYFLOAT TTL PTTL EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT)
//! PERSIST LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LRANGE LINDEX LLEN LSET LTRIM
//! LREM LINSERT LPOS LMOVE RPOPLPUSH LMPOP BLPOP BRPOP BLMOVE BRPOPLPUSH
//! BLMPOP BZPOPMIN BZPOPMAX ZMPOP BZMPOP HSET HMSET HSETNX HGET
//! HMGET HDEL HLEN HSTRLEN HEXISTS HKEYS HVALS HGETALL HINCRBY HINCRBYFLOAT HSCAN HRANDFIELD SADD
//! SREM SCARD SISMEMBER SMISMEMBER SMEMBERS SSCAN SINTER SUNION SDIFF
//! SINTERSTORE SUNIONSTORE SDIFFSTORE SINTERCARD SMOVE SPOP SRANDMEMBER
//! ZADD (NX XX GT LT CH INCR) ZINCRBY ZSCORE ZMSCORE ZCARD ZCOUNT ZLEXCOUNT
//! ZRANK ZREVRANK ZREM ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES)
//! ZRANGESTORE ZRANGEBYSCORE ZRANGEBYLEX ZREVRANGE ZREVRANGEBYSCORE
//! ZREVRANGEBYLEX ZPOPMIN ZPOPMAX ZREMRANGEBYRANK ZREMRANGEBYSCORE
//! ZREMRANGEBYLEX ZUNION ZINTER ZDIFF ZUNIONSTORE ZINTERSTORE ZDIFFSTORE
//! (WEIGHTS AGGREGATE WITHSCORES) ZINTERCARD ZRANDMEMBER ZSCAN SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE
//! PUBLISH PUBSUB (CHANNELS NUMSUB NUMPAT) SELECT SWAPDB OBJECT (ENCODING
//! FREQ IDLETIME REFCOUNT HELP) MEMORY USAGE
//! DBSIZE FLUSHALL FLUSHDB SELECT INFO (server, clients, memory, stats,
//! persistence, cpu, commandstats, errorstats, keyspace) CONFIG GET, CONFIG SET
//! (maxmemory, slowlog-log-slower-than, slowlog-max-len, ...), CONFIG
//! RESETSTAT, SLOWLOG (GET LEN RESET HELP; see the `slowlog` module)
//! COMMAND (COUNT, DOCS, INFO) CLIENT
//! (SETNAME GETNAME ID UNBLOCK LIST INFO KILL HELP; see the `clients`
//! module) RESET HELLO QUIT MULTI EXEC DISCARD WATCH UNWATCH (a
//! queuing error aborts the transaction with `EXECABORT`, and a change to
//! a watched key since WATCH, by any write, expiry, eviction or FLUSHALL,
//! makes EXEC answer a null array, as in Redis), with
//! Redis 7.0's arities and error
//! texts. SELECT and SWAPDB over Redis's 16 databases (FLUSHDB, DBSIZE,
//! KEYS and SCAN per database, `maxmemory` for all; MOVE and COPY between
//! them, sharing the value's buffers).
//! Differences, each answered with an error rather than a wrong answer:
//! RESP2 only (`HELLO 3`: `NOPROTO`, what Redis says for a version it does
//! not speak); empty keys, keys over [`Limits::max_key`] and values over
//! [`Limits::max_value`] (1 MiB: a value is one pool buffer) are refused;
//! pool exhaustion is Redis's `OOM` error.
//!
//! Types: a key holds a string (one element), a list, a hash, a set or a
//! sorted set (ranks in O(log n), scores printed as Redis prints them). A value
//! preloaded with more than one element is a list; a list made by
//! LPUSH/RPUSH is remembered as one even with a single element. A hash
//! lists its fields in insertion order up to 128 of them, as Redis's small
//! hashes do (in no particular order past that, as Redis's large ones).
//! A set lists its members in insertion order (Redis's order is its own).
//! HSCAN, SSCAN and ZSCAN return a collection of up to 128 entries in one
//! call, as Redis does its small encodings, and a larger one about COUNT
//! entries a call with Redis's guarantee (every entry that stays comes at
//! least once; see the `hash` module's `index_page`). SRANDMEMBER with a negative count of more than 2^24 picks is
//! refused, where Redis would build the reply.
//!
//! Expiry, as in Redis, both when a key is touched and actively: the
//! serving loop removes keys whose time is up between batches, soonest
//! first (up to 128 a batch, 4096 when idle; an index by time makes it
//! exact where Redis samples), so short-lived keys nobody reads again do
//! not hold memory (`INFO stats` `expired_keys`).
//!
//! Blocking pops as Redis 7.0 has them (see the `blocking` module): a
//! blocked connection's further input waits; the clients waiting on a key
//! are served right after the command that filled it, in the order they
//! blocked; timeouts to the millisecond; CLIENT UNBLOCK. Keys filled
//! through the key-value protocol (`serve_with_kv`) wake no one.
//!
//! Pub/sub as RESP2 has it (a subscribed connection may only subscribe,
//! unsubscribe, PING and QUIT); a subscriber that leaves more than 32 MiB
//! unread is disconnected, as Redis's `client-output-buffer-limit pubsub`.
//!
//! Connections ([`ServeOptions`]): a command of up to 64 MiB may arrive in
//! any number of reads (parsed again only once the bytes it needs are
//! there); a reply of any size goes out as the client reads it, while the
//! client's further input waits; a client that takes nothing of its reply
//! for 30 s is disconnected (Redis keeps it). At most a set number of
//! clients at once (`cf kv-server --maxclients`, 4096 by default; Redis's
//! is 10000); one more is answered [`MAX_CLIENTS_REACHED`] and closed, as
//! Redis does. LPUSH is amortized O(1), as in Redis.
//! Memory: `maxmemory` (`cf kv-server --maxmemory`, `CONFIG SET
//! maxmemory`) with Redis's policies (`--maxmemory-policy`, `CONFIG SET
//! maxmemory-policy`; see [`EvictionPolicy`]): once keys and values take
//! more, keys are evicted before the next command (`INFO stats`
//! `evicted_keys`), and only when none can go (`noeviction`, the default,
//! or a `volatile-*` policy with no key that expires) do commands that may
//! add data get Redis's `OOM` error ([`RespDb::set_maxmemory`] says how
//! this count differs from Redis's).
//! INFO's `used_memory` is that count; `pool_mapped_bytes` is the pinned
//! pool, which grows and is not given back (after FLUSHALL either).
//!
//! A password, as Redis's `requirepass` (`cf kv-server --requirepass` or
//! `CF_REQUIREPASS`, `CONFIG SET requirepass`): AUTH and HELLO's AUTH for
//! the `default` user, with Redis's NOAUTH and WRONGPASS answers; no ACL
//! users.
//!
//! SCAN (MATCH COUNT TYPE) has Redis's cursor and guarantees, each call
//! O(COUNT) (see [`Store::scan_step`]); `redis-cli --scan`, `--bigkeys`
//! and `--stat` work.
//!
//! The lexicographic sorted set commands assume, as Redis's do, that every
//! member has the same score; with several, they answer some range (Redis
//! leaves it unspecified, and its answer depends on its encoding).
//!
//! INCRBYFLOAT and HINCRBYFLOAT add in x87 `long double` and print what
//! Redis prints on x86-64 (see the `long_double` module), on any machine.
//!
//! Snapshots (see the `persistence` module): SAVE, BGSAVE, LASTSAVE,
//! save points, SHUTDOWN [SAVE|NOSAVE] and loading at start, in Redis's
//! RDB format, both ways between this server and redis-server 7.0; no
//! append-only file.
//!
//! Not implemented, answered `unknown command`: ACL, MEMORY's other
//! subcommands, the append-only file. OBJECT IDLETIME
//! is known only under an LRU policy (accesses are kept only while a policy
//! reads them).

mod blocking;
mod clients;
mod databases;
mod evict;
mod expiry;
mod hash;
mod introspect;
mod list;
mod long_double;
mod monitor;
mod persistence;
mod pubsub;
mod rdb;
mod serve;
mod set;
mod slowlog;
mod string;
#[cfg(test)]
mod tests;
mod watch;
mod zset;
mod zset_ops;

use std::time::{Duration, Instant};

use cornflakes::RcBuf;
use cornflakes_resp::{parse::parse_integer, Command, Reply};
use hashbrown::HashSet;

pub use self::clients::ClientAddrs;
pub use self::databases::DATABASES;
pub use self::evict::EvictionPolicy;
pub use self::serve::{serve, serve_with_kv, RawTransport, RespStats, ServeOptions};
use crate::protocol::{Limits, Status};
use crate::store::{Collection, Store};
/// Cornflakes' hybrid threshold (512 B), the default for RESP replies.
pub use cornflakes::field::DEFAULT_THRESHOLD;

/// What the server does after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Read the next command.
    Continue,
    /// Send what was replied, then close the connection (QUIT).
    Close,
    /// Send what was replied, if anything, and leave the connection's
    /// further input unread until [`RespDb::take_woken`] answers it (a
    /// blocking command found nothing to pop).
    Block,
}

/// Per-connection state commands can see.
#[derive(Clone, Debug, Default)]
pub struct Session {
    /// Set by `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// `CLIENT ID`.
    pub id: u64,
    /// Gave the password (AUTH), when one is required.
    authenticated: bool,
    /// The commands queued since `MULTI`, while in a transaction.
    multi: Option<Transaction>,
    /// The database it has SELECTed.
    db: usize,
    /// Set when a key this connection WATCHes changes (`None`: it watches
    /// none).
    watch: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// A transaction being queued (`MULTI` .. `EXEC`).
#[derive(Clone, Debug, Default)]
struct Transaction {
    /// Each command's name and arguments, copied.
    queued: Vec<Vec<Vec<u8>>>,
    /// Bytes queued, bounded by [`MAX_QUEUED_BYTES`].
    bytes: usize,
    /// A command was refused while queuing: `EXEC` discards them all.
    failed: bool,
}

/// Bytes of commands one transaction may queue (Redis bounds them by its
/// client output and query buffer limits).
const MAX_QUEUED_BYTES: usize = 64 << 20;

/// What a client past the connection limit is told before it is closed, in
/// Redis's words (a datapath's `refusal`, for example
/// [`TcpConfig::refusal`](cornflakes_datapath::tcp::TcpConfig::refusal)).
pub const MAX_CLIENTS_REACHED: &[u8] = b"-ERR max number of clients reached\r\n";

/// Redis's loop around a scan cursor (SCAN's, ZSCAN's): `step` visits
/// one class from a cursor and says the next and how many entries have
/// been visited so far; steps go on until COUNT entries, or 10 x COUNT
/// classes, were visited, or the scan is over. The cursor to reply.
fn scan_steps(cursor: u64, count: usize, mut step: impl FnMut(u64) -> (u64, usize)) -> u64 {
    let mut next = cursor;
    for _ in 0..count.saturating_mul(10).max(1) {
        let visited;
        (next, visited) = step(next);
        if next == 0 || visited >= count {
            break;
        }
    }
    next
}

/// Replies `lines` as an array of simple strings (the HELP subcommands).
fn help_reply(reply: &mut Reply<RcBuf>, lines: &[&str]) {
    reply.array(lines.len());
    for line in lines {
        reply.simple(line);
    }
}

/// The line of [`COMMANDS`] of the command named `name` (lower case).
fn command_index(name: &str) -> Option<usize> {
    COMMANDS.binary_search_by(|c| c.0.cmp(name)).ok()
}

/// The store's limits for RESP: lists as long as memory allows (Redis has
/// no limit), keys up to 64 KiB, values up to 1 MiB (a value is one pool
/// buffer, at most 2 MiB, and a reply must fit one send).
pub fn resp_limits() -> Limits {
    Limits { max_key: 64 << 10, max_value: 1 << 20, max_keys: usize::MAX, max_list: 1 << 24, max_response: usize::MAX }
}

/// Keys, their types and expiry times, over a [`Store`].
pub struct RespDb {
    store: Store,
    /// Keys made lists by LPUSH/RPUSH (a value of more than one element
    /// is a list anyway).
    lists: HashSet<Box<[u8]>>,
    expires: expiry::Expiry,
    threshold: usize,
    started: Instant,
    /// Bytes of keys and values past which commands that may add data are
    /// refused (Redis's `maxmemory` with its default policy, `noeviction`);
    /// 0: no limit.
    maxmemory: usize,
    /// What is evicted once `maxmemory` is reached.
    policy: EvictionPolicy,
    /// Keys the LRU and LFU policies draw per eviction (`maxmemory-samples`).
    samples: usize,
    /// The password of Redis's `default` user (`requirepass`): when set, a
    /// connection runs nothing but AUTH, HELLO and QUIT until it has given
    /// it.
    requirepass: Option<Vec<u8>>,
    /// The serving loop's counts, for INFO (see [`ServerCounters`]).
    pub(crate) counters: ServerCounters,
    /// Connections' WATCHes.
    watchers: watch::Watchers,
    /// Which database `store`, `lists`, `expires` and `watchers` hold.
    db: usize,
    /// The other databases (slot `db` holds an empty stand-in).
    parked: Vec<databases::Keyspace>,
    /// Subscriptions, and messages published and not yet delivered.
    pubsub: pubsub::PubSub,
    /// Clients blocked on keys (BLPOP ...), and the keys made ready.
    blocking: blocking::Blocking,
    /// What CLIENT LIST and CLIENT KILL know of the connections.
    clients: clients::Clients,
    /// Where SAVE and BGSAVE write, and how the last ones went.
    persistence: persistence::Persistence,
    /// Connections that ran MONITOR.
    monitors: Vec<u64>,
    /// INFO commandstats and errorstats.
    command_stats: slowlog::CommandStats,
    /// SLOWLOG.
    slowlog: slowlog::SlowLog,
    /// Times each command.
    clock: slowlog::CommandClock,
    /// Set when a command got past the checks and ran (MONITOR shows
    /// those only).
    ran: bool,
    /// Running the commands of an EXEC (checked once, for them all).
    in_exec: bool,
    /// The best eviction candidates drawn so far (LRU and LFU policies).
    candidates: evict::Candidates,
}

/// What INFO reports of the serving loop ([`serve`] keeps it).
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerCounters {
    /// Connections that have sent something and are not closed.
    pub connected_clients: usize,
    /// Connections seen since the start.
    pub total_connections: u64,
    /// Commands run since the start.
    pub total_commands: u64,
    /// The connection limit (`cf kv-server --maxclients`); 0: not known.
    pub max_clients: usize,
    /// Keys removed because their time was up (read after it, or found by
    /// the active expiry).
    pub expired_keys: u64,
    /// Keys removed by the eviction policy to stay within `maxmemory`.
    pub evicted_keys: u64,
    /// Keys GET, MGET and GETEX found, and did not find (a cache's hit
    /// ratio, as Redis's `keyspace_hits` and `keyspace_misses`).
    pub keyspace_hits: u64,
    /// See [`keyspace_hits`](Self::keyspace_hits).
    pub keyspace_misses: u64,
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    List,
    Hash,
    Set,
    ZSet,
}

impl Kind {
    /// The name TYPE answers (and SCAN's TYPE option takes).
    fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::List => "list",
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::ZSet => "zset",
        }
    }
}

/// `(name, arity, flags)` as Redis 7.0's command table has them: a
/// positive arity is exact, a negative one a minimum (name included).
/// Sorted by name (commands are found by bisection).
const COMMANDS: &[(&str, i64, &[&str])] = &[
    ("append", 3, &["write", "denyoom"]),
    ("auth", -2, &["noscript", "loading", "stale", "fast", "no_auth"]),
    ("bgsave", -1, &["admin", "noscript", "no_async_loading"]),
    ("blmove", 6, &["write", "denyoom", "noscript", "blocking"]),
    ("blmpop", -5, &["write", "blocking", "movablekeys"]),
    ("blpop", -3, &["write", "noscript", "blocking"]),
    ("brpop", -3, &["write", "noscript", "blocking"]),
    ("brpoplpush", 4, &["write", "denyoom", "noscript", "blocking"]),
    ("bzmpop", -5, &["write", "blocking", "movablekeys"]),
    ("bzpopmax", -3, &["write", "noscript", "blocking", "fast"]),
    ("bzpopmin", -3, &["write", "noscript", "blocking", "fast"]),
    ("client", -2, &["noscript", "loading", "stale"]),
    ("command", -1, &["loading", "stale"]),
    ("config", -2, &["admin", "noscript", "loading", "stale"]),
    ("copy", -3, &["write", "denyoom"]),
    ("dbsize", 1, &["readonly", "fast"]),
    ("decr", 2, &["write", "denyoom", "fast"]),
    ("decrby", 3, &["write", "denyoom", "fast"]),
    ("del", -2, &["write"]),
    ("discard", 1, &["noscript", "loading", "stale", "fast"]),
    ("echo", 2, &["fast"]),
    ("exec", 1, &["noscript", "loading", "stale"]),
    ("exists", -2, &["readonly", "fast"]),
    ("expire", -3, &["write", "fast"]),
    ("expireat", -3, &["write", "fast"]),
    ("flushall", -1, &["write"]),
    ("flushdb", -1, &["write"]),
    ("get", 2, &["readonly", "fast"]),
    ("getdel", 2, &["write", "fast"]),
    ("getex", -2, &["write", "fast"]),
    ("getrange", 4, &["readonly"]),
    ("getset", 3, &["write", "denyoom", "fast"]),
    ("hdel", -3, &["write", "fast"]),
    ("hello", -1, &["noscript", "loading", "stale", "fast", "no_auth"]),
    ("hexists", 3, &["readonly", "fast"]),
    ("hget", 3, &["readonly", "fast"]),
    ("hgetall", 2, &["readonly"]),
    ("hincrby", 4, &["write", "denyoom", "fast"]),
    ("hincrbyfloat", 4, &["write", "denyoom", "fast"]),
    ("hkeys", 2, &["readonly"]),
    ("hlen", 2, &["readonly", "fast"]),
    ("hmget", -3, &["readonly", "fast"]),
    ("hmset", -4, &["write", "denyoom", "fast"]),
    ("hrandfield", -2, &["readonly"]),
    ("hscan", -3, &["readonly"]),
    ("hset", -4, &["write", "denyoom", "fast"]),
    ("hsetnx", 4, &["write", "denyoom", "fast"]),
    ("hstrlen", 3, &["readonly", "fast"]),
    ("hvals", 2, &["readonly"]),
    ("incr", 2, &["write", "denyoom", "fast"]),
    ("incrby", 3, &["write", "denyoom", "fast"]),
    ("incrbyfloat", 3, &["write", "denyoom", "fast"]),
    ("info", -1, &["loading", "stale"]),
    ("keys", 2, &["readonly"]),
    ("lastsave", 1, &["loading", "stale", "fast"]),
    ("lindex", 3, &["readonly"]),
    ("linsert", 5, &["write", "denyoom"]),
    ("llen", 2, &["readonly", "fast"]),
    ("lmove", 5, &["write", "denyoom"]),
    ("lmpop", -4, &["write", "movablekeys"]),
    ("lpop", -2, &["write", "fast"]),
    ("lpos", -3, &["readonly"]),
    ("lpush", -3, &["write", "denyoom", "fast"]),
    ("lpushx", -3, &["write", "denyoom", "fast"]),
    ("lrange", 4, &["readonly"]),
    ("lrem", 4, &["write"]),
    ("lset", 4, &["write", "denyoom"]),
    ("ltrim", 4, &["write"]),
    ("memory", -2, &[]),
    ("mget", -2, &["readonly", "fast"]),
    ("monitor", 1, &["admin", "noscript", "loading", "stale"]),
    ("move", 3, &["write", "fast"]),
    ("mset", -3, &["write", "denyoom"]),
    ("msetnx", -3, &["write", "denyoom"]),
    ("multi", 1, &["noscript", "loading", "stale", "fast"]),
    ("object", -2, &[]),
    ("persist", 2, &["write", "fast"]),
    ("pexpire", -3, &["write", "fast"]),
    ("pexpireat", -3, &["write", "fast"]),
    ("ping", -1, &["fast"]),
    ("psetex", 4, &["write", "denyoom"]),
    ("psubscribe", -2, &["pubsub", "noscript", "loading", "stale"]),
    ("pttl", 2, &["readonly", "fast"]),
    ("publish", 3, &["pubsub", "loading", "stale", "fast"]),
    ("pubsub", -2, &["pubsub", "loading", "stale"]),
    ("punsubscribe", -1, &["pubsub", "noscript", "loading", "stale"]),
    ("quit", -1, &["noscript", "loading", "stale", "fast", "no_auth"]),
    ("rename", 3, &["write"]),
    ("renamenx", 3, &["write", "fast"]),
    ("reset", 1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"]),
    ("rpop", -2, &["write", "fast"]),
    ("rpoplpush", 3, &["write", "denyoom"]),
    ("rpush", -3, &["write", "denyoom", "fast"]),
    ("rpushx", -3, &["write", "denyoom", "fast"]),
    ("sadd", -3, &["write", "denyoom", "fast"]),
    ("save", 1, &["admin", "noscript", "no_async_loading", "no_multi"]),
    ("scan", -2, &["readonly"]),
    ("scard", 2, &["readonly", "fast"]),
    ("sdiff", -2, &["readonly"]),
    ("sdiffstore", -3, &["write", "denyoom"]),
    ("select", 2, &["loading", "stale", "fast"]),
    ("set", -3, &["write", "denyoom"]),
    ("setex", 4, &["write", "denyoom"]),
    ("setnx", 3, &["write", "denyoom", "fast"]),
    ("setrange", 4, &["write", "denyoom"]),
    ("shutdown", -1, &["admin", "noscript", "loading", "stale", "no_multi", "sentinel", "allow_busy"]),
    ("sinter", -2, &["readonly"]),
    ("sintercard", -3, &["readonly", "movablekeys"]),
    ("sinterstore", -3, &["write", "denyoom"]),
    ("sismember", 3, &["readonly", "fast"]),
    ("slowlog", -2, &["admin", "loading", "stale"]),
    ("smembers", 2, &["readonly"]),
    ("smismember", -3, &["readonly", "fast"]),
    ("smove", 4, &["write", "fast"]),
    ("spop", -2, &["write", "fast"]),
    ("srandmember", -2, &["readonly"]),
    ("srem", -3, &["write", "fast"]),
    ("sscan", -3, &["readonly"]),
    ("strlen", 2, &["readonly", "fast"]),
    ("subscribe", -2, &["pubsub", "noscript", "loading", "stale"]),
    ("substr", 4, &["readonly"]),
    ("sunion", -2, &["readonly"]),
    ("sunionstore", -3, &["write", "denyoom"]),
    ("swapdb", 3, &["write", "fast"]),
    ("touch", -2, &["readonly", "fast"]),
    ("ttl", 2, &["readonly", "fast"]),
    ("type", 2, &["readonly", "fast"]),
    ("unlink", -2, &["write", "fast"]),
    ("unsubscribe", -1, &["pubsub", "noscript", "loading", "stale"]),
    ("unwatch", 1, &["noscript", "loading", "stale", "fast", "allow_busy"]),
    ("watch", -2, &["noscript", "loading", "stale", "fast", "allow_busy"]),
    ("zadd", -4, &["write", "denyoom", "fast"]),
    ("zcard", 2, &["readonly", "fast"]),
    ("zcount", 4, &["readonly", "fast"]),
    ("zdiff", -3, &["readonly", "movablekeys"]),
    ("zdiffstore", -4, &["write", "denyoom", "movablekeys"]),
    ("zincrby", 4, &["write", "denyoom", "fast"]),
    ("zinter", -3, &["readonly", "movablekeys"]),
    ("zintercard", -3, &["readonly", "movablekeys"]),
    ("zinterstore", -4, &["write", "denyoom", "movablekeys"]),
    ("zlexcount", 4, &["readonly", "fast"]),
    ("zmpop", -4, &["write", "movablekeys"]),
    ("zmscore", -3, &["readonly", "fast"]),
    ("zpopmax", -2, &["write", "fast"]),
    ("zpopmin", -2, &["write", "fast"]),
    ("zrandmember", -2, &["readonly"]),
    ("zrange", -4, &["readonly"]),
    ("zrangebylex", -4, &["readonly"]),
    ("zrangebyscore", -4, &["readonly"]),
    ("zrangestore", -5, &["write", "denyoom"]),
    ("zrank", 3, &["readonly", "fast"]),
    ("zrem", -3, &["write", "fast"]),
    ("zremrangebylex", 4, &["write"]),
    ("zremrangebyrank", 4, &["write"]),
    ("zremrangebyscore", 4, &["write"]),
    ("zrevrange", -4, &["readonly"]),
    ("zrevrangebylex", -4, &["readonly"]),
    ("zrevrangebyscore", -4, &["readonly"]),
    ("zrevrank", 3, &["readonly", "fast"]),
    ("zscan", -3, &["readonly"]),
    ("zscore", 3, &["readonly", "fast"]),
    ("zunion", -3, &["readonly", "movablekeys"]),
    ("zunionstore", -4, &["write", "denyoom", "movablekeys"]),
];

/// How SET and GETEX give an expiry: a time to live or a Unix time, in
/// seconds or milliseconds.
#[derive(Clone, Copy)]
enum TtlUnit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

impl TtlUnit {
    fn of(opt: &[u8]) -> Option<TtlUnit> {
        let is = |s: &[u8]| opt.eq_ignore_ascii_case(s);
        Some(if is(b"ex") {
            TtlUnit::Ex
        } else if is(b"px") {
            TtlUnit::Px
        } else if is(b"exat") {
            TtlUnit::ExAt
        } else if is(b"pxat") {
            TtlUnit::PxAt
        } else {
            return None;
        })
    }
}

/// The deadline `n` (in `unit`) names, checked as Redis checks it: a
/// positive integer whose deadline in Unix milliseconds fits in an i64
/// (TTL and PTTL report it). A Unix time already past is a deadline now.
fn deadline(unit: TtlUnit, n: &[u8], command: &str) -> Result<Instant, String> {
    let n = integer_arg(n).ok_or_else(|| NOT_INTEGER.to_owned())?;
    let invalid = || format!("ERR invalid expire time in '{command}' command");
    let seconds = matches!(unit, TtlUnit::Ex | TtlUnit::ExAt);
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(invalid());
    }
    let ms = if seconds { n * 1000 } else { n };
    let now_ms = unix_ms();
    let ttl_ms = match unit {
        TtlUnit::Ex | TtlUnit::Px if ms > i64::MAX - now_ms => return Err(invalid()),
        TtlUnit::Ex | TtlUnit::Px => ms,
        TtlUnit::ExAt | TtlUnit::PxAt => ms.saturating_sub(now_ms).max(0),
    };
    let now = Instant::now();
    Ok(now.checked_add(Duration::from_millis(ttl_ms as u64)).unwrap_or_else(|| now + Duration::from_secs(1 << 40)))
}

/// Whether the command named `name` (any case) may add data (Redis's
/// `denyoom` flag).
fn command_denies_oom(name: &[u8]) -> bool {
    COMMANDS.iter().any(|(n, _, flags)| n.as_bytes().eq_ignore_ascii_case(name) && flags.contains(&"denyoom"))
}

fn arity_ok(arity: i64, argc: usize) -> bool {
    let argc = argc as i64;
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// Redis's text for an unknown command: the name and the start of its
/// arguments, 128 bytes at most each.
fn unknown_command(cmd: &Command<'_>) -> String {
    let mut args = String::new();
    for a in cmd.args.iter().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push('\'');
        args.push_str(&lossy(&a[..a.len().min(room)]));
        args.push_str("' ");
    }
    let name = cmd.name();
    format!("ERR unknown command '{}', with args beginning with: {args}", lossy(&name[..name.len().min(128)]))
}

fn unknown_subcommand(container: &str, sub: &[u8]) -> String {
    format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        lossy(&sub[..sub.len().min(128)]),
        container.to_ascii_uppercase()
    )
}

fn arity_error(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

fn integer_arg(arg: &[u8]) -> Option<i64> {
    parse_integer(arg)
}

/// The error reply for a store status.
fn status_error(status: Status) -> &'static str {
    match status {
        Status::NoMemory => "OOM command not allowed when used memory > 'maxmemory'.",
        Status::TooLarge => "ERR string exceeds maximum allowed size (this server: 1 MiB values, 64 KiB keys)",
        Status::BadRequest => "ERR empty keys are not supported by this server",
        _ => "ERR internal error",
    }
}

impl RespDb {
    /// A database over `store`; values of at least `threshold` bytes are
    /// replied by reference (zero-copy).
    pub fn new(store: Store, threshold: usize) -> Self {
        let parked = (0..DATABASES).map(|_| databases::Keyspace::empty_like(&store)).collect();
        RespDb {
            store,
            lists: HashSet::new(),
            expires: expiry::Expiry::default(),
            threshold,
            started: Instant::now(),
            maxmemory: 0,
            policy: EvictionPolicy::NoEviction,
            samples: 5,
            requirepass: None,
            counters: ServerCounters::default(),
            watchers: watch::Watchers::default(),
            db: 0,
            parked,
            pubsub: pubsub::PubSub::default(),
            blocking: blocking::Blocking::default(),
            clients: clients::Clients::default(),
            persistence: persistence::Persistence::default(),
            monitors: Vec::new(),
            command_stats: slowlog::CommandStats::new(),
            slowlog: slowlog::SlowLog::default(),
            clock: slowlog::CommandClock::new(),
            ran: false,
            in_exec: false,
            candidates: evict::Candidates::default(),
        }
    }

    /// Refuses commands that may add data once keys and values take more
    /// than `bytes` (0: no limit), answering Redis's `OOM` error, as Redis
    /// does with `maxmemory` and its default policy (`noeviction`). Redis
    /// counts its allocator's total; this counts the bytes of keys and
    /// values, so the same limit holds more data here.
    pub fn set_maxmemory(&mut self, bytes: usize) {
        self.maxmemory = bytes;
    }

    /// Requires connections to authenticate with `password` (AUTH, or
    /// HELLO's AUTH option) before anything else, as Redis's `requirepass`
    /// does; `None` (the default): no password. Connections that already
    /// authenticated stay so, as in Redis.
    pub fn set_requirepass(&mut self, password: Option<&[u8]>) {
        self.requirepass = password.filter(|p| !p.is_empty()).map(<[u8]>::to_vec);
    }

    /// The state of a new connection `id`: authenticated when no password
    /// is required, as Redis's connections are (they stay so when one is
    /// set later, by CONFIG SET requirepass).
    pub fn new_session(&self, id: u64) -> Session {
        Session { id, authenticated: self.requirepass.is_none(), ..Session::default() }
    }

    /// Whether `user` / `password` are the `default` user's (any password,
    /// when none is required, as Redis's `nopass` default user).
    fn password_ok(&self, user: &[u8], password: &[u8]) -> bool {
        user == b"default" && self.requirepass.as_deref().is_none_or(|want| same_secret(want, password))
    }

    /// The `maxmemory` limit in bytes (0: none).
    pub fn maxmemory(&self) -> usize {
        self.maxmemory
    }

    /// The connection limit INFO and `CONFIG GET maxclients` report.
    pub fn set_max_clients(&mut self, n: usize) {
        self.counters.max_clients = n;
    }

    /// The underlying store.
    /// The store of database 0 (the one the key-value protocol serves, and
    /// `cf kv-server` preloads).
    pub fn store(&self) -> &Store {
        if self.db == 0 {
            &self.store
        } else {
            &self.parked[0].store
        }
    }

    /// The store of database 0, to preload it or serve the key-value
    /// protocol from it.
    pub fn store_mut(&mut self) -> &mut Store {
        self.use_db(0);
        &mut self.store
    }

    /// The zero-copy threshold.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Removes `key` when its time is up; its kind when it exists.
    fn kind(&mut self, key: &[u8]) -> Option<Kind> {
        if !self.expires.is_empty() {
            if let Some(&at) = self.expires.get(key) {
                if at <= Instant::now() {
                    self.delete(key);
                    self.watchers.touched(key);
                    self.counters.expired_keys += 1;
                    return None;
                }
            }
        }
        let kind = self.kind_now(key);
        if kind.is_some() {
            self.store.touch(key);
        }
        kind
    }

    /// Whether `key` holds a value of kind `want`: `Ok(false)` when it is
    /// missing, `WRONGTYPE` when it holds another kind (expired keys
    /// removed first).
    fn expect_kind(&mut self, key: &[u8], want: Kind) -> Result<bool, &'static str> {
        match self.kind(key) {
            None => Ok(false),
            Some(k) if k == want => Ok(true),
            Some(_) => Err(WRONGTYPE),
        }
    }

    /// The kind of `key` as stored, whether or not its time is up.
    fn kind_now(&self, key: &[u8]) -> Option<Kind> {
        let Some(value) = self.store.get(key) else {
            return self.store.collection(key).map(|c| match c {
                Collection::Hash(_) => Kind::Hash,
                Collection::Set(_) => Kind::Set,
                Collection::ZSet(_) => Kind::ZSet,
            });
        };
        if value.len() != 1 || (!self.lists.is_empty() && self.lists.contains(key)) {
            Some(Kind::List)
        } else {
            Some(Kind::String)
        }
    }

    /// Removes up to `max` keys whose time is up at `now` (the active
    /// expiry, which the serving loop runs between batches); how many.
    pub fn expire_due(&mut self, now: Instant, max: usize) -> usize {
        let mut n = 0;
        self.for_each_db(|db| n += db.expire_due_here(now, max - n));
        n
    }

    /// [`expire_due`](Self::expire_due) in the current database.
    fn expire_due_here(&mut self, now: Instant, max: usize) -> usize {
        if self.expires.is_empty() {
            return 0;
        }
        let mut n = 0;
        while n < max {
            let Some(key) = self.expires.pop_due(now) else { break };
            if !self.lists.is_empty() {
                self.lists.remove(&key);
            }
            self.store.remove(&key);
            self.watchers.touched(&key);
            n += 1;
        }
        self.counters.expired_keys += n as u64;
        n
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        if !self.expires.is_empty() {
            self.expires.remove(key);
        }
        if !self.lists.is_empty() {
            self.lists.remove(key);
        }
        self.store.remove(key)
    }

    /// The string value of `key`: `Ok(None)` when missing, `Err` when of
    /// another kind.
    fn string(&mut self, key: &[u8]) -> Result<Option<&RcBuf>, &'static str> {
        match self.kind(key) {
            None => Ok(None),
            Some(Kind::List | Kind::Hash | Kind::Set | Kind::ZSet) => Err(WRONGTYPE),
            Some(Kind::String) => Ok(self.store.get(key).and_then(|v| v.first())),
        }
    }

    /// Sets `key` to the string `value` (no expiry).
    fn set_string(&mut self, key: &[u8], value: &[u8]) -> Result<(), Status> {
        // An access for an existing key (MSET does not look it up first);
        // a new key starts at the index's own first record, as in Redis.
        let existed = self.store.key_index().is_some() && self.store.get(key).is_some();
        self.store.put(key, &[value])?;
        if existed {
            self.store.touch(key);
        }
        if !self.lists.is_empty() {
            self.lists.remove(key);
        }
        if !self.expires.is_empty() {
            self.expires.remove(key);
        }
        Ok(())
    }

    fn value(&self, reply: &mut Reply<RcBuf>, v: &RcBuf) {
        if v.len() >= self.threshold {
            reply.bulk_value(v.clone());
        } else {
            reply.bulk(v);
        }
    }

    /// The time the next commands run at (the serving loop's batch start;
    /// CLIENT LIST's idle times count from it); the save points are looked
    /// at then.
    pub fn tick(&mut self, now: Instant) {
        self.clients.set_now(now);
        self.save_points_due(now);
    }

    /// Runs `cmd` for the connection `session`, appending its reply.
    pub fn execute(&mut self, cmd: &Command<'_>, session: &mut Session, reply: &mut Reply<RcBuf>) -> After {
        let mut lower = [0u8; 16];
        let name = cmd.name();
        let index = (name.len() <= lower.len())
            .then(|| {
                lower[..name.len()].copy_from_slice(name);
                lower[..name.len()].make_ascii_lowercase();
                &lower[..name.len()]
            })
            .and_then(|n| COMMANDS.binary_search_by(|c| c.0.as_bytes().cmp(n)).ok());
        let entry = index.map(|i| &COMMANDS[i]);
        self.ran = false;
        let (errors_before, counted_before) = (reply.errors(), self.command_stats.counted_before());
        let started = self.clock.now();
        let after = self.run_command(entry, cmd, session, reply);
        let time = self.clock.since(started);
        if let Some(index) = index {
            let how = slowlog::Outcome {
                index,
                args: &cmd.args,
                ran: self.ran,
                blocked: after == After::Block,
                time,
                errors_before,
                counted_before,
            };
            self.count_command(session.id, session.name.as_deref(), how, reply);
        } else {
            self.count_unknown(reply, errors_before, counted_before);
        }
        // For CLIENT LIST: the connection as this command left it.
        self.clients.ran(session, entry.map(|e| e.0), &cmd.args);
        if !self.monitors.is_empty() && self.ran && entry.is_some_and(|e| !e.2.contains(&"admin")) {
            self.feed_monitors(session, &cmd.args);
        }
        after
    }

    /// [`execute`](Self::execute)'s checks and the command (`entry`: its
    /// line of the command table, if it has one).
    fn run_command(
        &mut self,
        entry: Option<&(&'static str, i64, &'static [&'static str])>,
        cmd: &Command<'_>,
        session: &mut Session,
        reply: &mut Reply<RcBuf>,
    ) -> After {
        self.use_db(session.db);
        let name = cmd.name();
        let Some(entry) = entry else {
            // An HTTP request sent to this port (a browser, or a page making
            // one cross-protocol): closed without a reply, as Redis does.
            if name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:") {
                return After::Close;
            }
            reply.error(&unknown_command(cmd));
            if let Some(t) = session.multi.as_mut() {
                t.failed = true;
            }
            return After::Continue;
        };
        let (name, arity, flags) = *entry;
        let args = &cmd.args[1..];
        self.counters.total_commands += 1;
        if !arity_ok(arity, cmd.args.len()) {
            reply.error(&arity_error(name));
            if let Some(t) = session.multi.as_mut() {
                t.failed = true;
            }
            return After::Continue;
        }
        // Over maxmemory: evict by the policy first, as Redis does before
        // any command (not before each command EXEC runs: EXEC was checked
        // for them all); refuse what may add data only when nothing could
        // be evicted. Past the per-command bound the command runs, and the
        // next ones go on evicting (Redis's eviction in progress).
        // Inside MULTI any command but EXEC, DISCARD and QUIT is refused, as
        // Redis refuses them: queuing takes memory too.
        let denyoom = flags.contains(&"denyoom")
            || (session.multi.is_some() && !matches!(name, "exec" | "discard" | "quit" | "reset"))
            || (name == "exec"
                && session.multi.as_ref().is_some_and(|t| t.queued.iter().any(|q| command_denies_oom(&q[0]))));
        if !self.in_exec
            && self.maxmemory != 0
            && self.used_bytes() > self.maxmemory
            && self.evict() == evict::Eviction::Failed
            && denyoom
        {
            reply.error(status_error(Status::NoMemory));
            if let Some(t) = session.multi.as_mut() {
                t.failed = true;
            }
            return After::Continue;
        }
        if self.requirepass.is_some() && !session.authenticated && !matches!(name, "auth" | "hello" | "quit" | "reset")
        {
            reply.error("NOAUTH Authentication required.");
            if let Some(t) = session.multi.as_mut() {
                t.failed = true;
            }
            return After::Continue;
        }
        if self.subscribed(session.id) && !pubsub::ALLOWED_WHEN_SUBSCRIBED.contains(&name) {
            reply.error(&format!("ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"));
            if let Some(t) = session.multi.as_mut() {
                t.failed = true;
            }
            return After::Continue;
        }
        if let Some(t) = session.multi.as_mut() {
            if flags.contains(&"no_multi") {
                t.failed = true;
                reply.error("ERR Command not allowed inside a transaction");
                return After::Continue;
            }
            if !matches!(name, "exec" | "discard" | "multi" | "quit" | "watch" | "reset") {
                let bytes: usize = cmd.args.iter().map(|a| a.len() + 16).sum();
                if t.bytes + bytes > MAX_QUEUED_BYTES {
                    t.failed = true;
                    reply.error("ERR transaction too large: its queued commands exceed 64 MiB");
                } else {
                    t.bytes += bytes;
                    t.queued.push(cmd.args.iter().map(|a| a.to_vec()).collect());
                    reply.simple("QUEUED");
                }
                return After::Continue;
            }
        }
        // Whether the command changed something, for the connections
        // that WATCH the keys it names.
        let before = (!self.watchers.is_empty() && flags.contains(&"write"))
            .then(|| (self.store.writes(), self.expires.changes()));
        self.ran = true;
        let after = self.dispatch(name, cmd, session, reply);
        if before.is_some_and(|b| b != (self.store.writes(), self.expires.changes())) {
            for key in watch::written_keys(name, args) {
                self.watchers.touched(key);
            }
        }
        // A key someone waits on may hold something now: the serving loop
        // serves them before the next command (as Redis does).
        if !self.blocking.is_empty() && flags.contains(&"write") {
            if matches!(name, "swapdb" | "move" | "copy") {
                // Keys of another database changed.
                self.blocking.signal_all();
            } else {
                for key in watch::written_keys(name, args) {
                    self.blocking.signal(self.db, key);
                }
            }
        }
        after
    }

    /// Runs command `name` (arity, memory, authentication and transaction
    /// queuing checked).
    fn dispatch(&mut self, name: &str, cmd: &Command<'_>, session: &mut Session, reply: &mut Reply<RcBuf>) -> After {
        let args = &cmd.args[1..];
        match name {
            "multi" => match session.multi {
                Some(_) => reply.error("ERR MULTI calls can not be nested"),
                None => {
                    session.multi = Some(Transaction::default());
                    reply.simple("OK");
                }
            },
            "discard" => match session.multi.take() {
                Some(_) => {
                    session.watch = None;
                    reply.simple("OK")
                }
                None => reply.error("ERR DISCARD without MULTI"),
            },
            "watch" if session.multi.is_some() => reply.error("ERR WATCH inside MULTI is not allowed"),
            "watch" => {
                let flag = session.watch.get_or_insert_with(Default::default);
                for key in args {
                    self.watchers.watch(key, flag);
                }
                reply.simple("OK")
            }
            "unwatch" => {
                session.watch = None;
                reply.simple("OK")
            }
            // One thread runs every command: nothing runs between them.
            "exec" => match session.multi.take() {
                None => reply.error("ERR EXEC without MULTI"),
                Some(t) if t.failed => {
                    session.watch = None;
                    reply.error("EXECABORT Transaction discarded because of previous errors.")
                }
                // A watched key changed since WATCH: nothing runs.
                Some(_) if session.watch.take().is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed)) => {
                    reply.null_array()
                }
                Some(t) => {
                    reply.array(t.queued.len());
                    self.in_exec = true;
                    for args in &t.queued {
                        let cmd = Command { args: args.iter().map(|a| std::borrow::Cow::Borrowed(&a[..])).collect() };
                        self.execute(&cmd, session, reply);
                    }
                    self.in_exec = false;
                }
            },
            "get" => match self.string(&args[0]) {
                Ok(Some(v)) => {
                    let v = v.clone();
                    self.counters.keyspace_hits += 1;
                    self.value(reply, &v)
                }
                Ok(None) => {
                    self.counters.keyspace_misses += 1;
                    reply.null()
                }
                Err(e) => reply.error(e),
            },
            "set" => self.set("set", args, reply),
            // The SET variants Redis keeps, as SET with options.
            "setex" | "psetex" => {
                let unit: &[u8] = if name == "setex" { b"EX" } else { b"PX" };
                let as_set = [args[0].clone(), args[2].clone(), unit.into(), args[1].clone()];
                self.set(name, &as_set, reply)
            }
            "getset" => {
                let as_set = [args[0].clone(), args[1].clone(), (&b"GET"[..]).into()];
                self.set(name, &as_set, reply)
            }
            "setnx" => {
                if self.kind(&args[0]).is_some() {
                    reply.integer(0);
                } else {
                    match self.set_string(&args[0], &args[1]) {
                        Ok(()) => reply.integer(1),
                        Err(s) => reply.error(status_error(s)),
                    }
                }
            }
            "getdel" => match self.string(&args[0]) {
                Ok(Some(v)) => {
                    let v = v.clone();
                    self.value(reply, &v);
                    self.delete(&args[0]);
                }
                Ok(None) => reply.null(),
                Err(e) => reply.error(e),
            },
            "getex" => self.getex(args, reply),
            "mget" => {
                reply.array(args.len());
                for key in args {
                    match self.string(key) {
                        Ok(Some(v)) => {
                            let v = v.clone();
                            self.counters.keyspace_hits += 1;
                            self.value(reply, &v)
                        }
                        _ => {
                            self.counters.keyspace_misses += 1;
                            reply.null()
                        }
                    }
                }
            }
            "mset" => {
                if !args.len().is_multiple_of(2) {
                    reply.error(&arity_error(name));
                } else {
                    // All or nothing, as in Redis: every pair is checked
                    // before any is written.
                    let mut failed = args.chunks(2).find_map(|kv| self.store.check_put(&kv[0], &[&kv[1]]).err());
                    if failed.is_none() {
                        for kv in args.chunks(2) {
                            if let Err(s) = self.set_string(&kv[0], &kv[1]) {
                                failed = Some(s);
                                break;
                            }
                        }
                    }
                    match failed {
                        None => reply.simple("OK"),
                        Some(s) => reply.error(status_error(s)),
                    }
                }
            }
            "del" | "unlink" => {
                let n = args.iter().filter(|k| self.kind(k).is_some() && self.delete(k)).count();
                reply.integer(n as i64);
            }
            "exists" | "touch" => {
                let n = args.iter().filter(|k| self.kind(k).is_some()).count();
                reply.integer(n as i64);
            }
            "append" => match self.string(&args[0]) {
                Err(e) => reply.error(e),
                Ok(old) => {
                    let mut new = old.map(|v| v.to_vec()).unwrap_or_default();
                    new.extend_from_slice(&args[1]);
                    // APPEND keeps the key's time to live.
                    let ttl = self.expires.get(&args[0][..]).copied();
                    match self.set_string(&args[0], &new) {
                        Ok(()) => {
                            if let Some(at) = ttl {
                                self.expires.insert(args[0][..].into(), at);
                            }
                            reply.integer(new.len() as i64)
                        }
                        Err(s) => reply.error(status_error(s)),
                    }
                }
            },
            "strlen" => match self.string(&args[0]) {
                Ok(v) => reply.integer(v.map_or(0, |v| v.len() as i64)),
                Err(e) => reply.error(e),
            },
            "incr" => self.incr_by(&args[0], 1, reply),
            "decr" => self.incr_by(&args[0], -1, reply),
            "incrby" | "decrby" => match integer_arg(&args[1]) {
                None => reply.error(NOT_INTEGER),
                Some(i64::MIN) if name == "decrby" => reply.error("ERR decrement would overflow"),
                Some(n) => self.incr_by(&args[0], if name == "decrby" { -n } else { n }, reply),
            },
            "type" => reply.simple(self.kind(&args[0]).map_or("none", Kind::name)),
            "expire" | "pexpire" | "expireat" | "pexpireat" => self.expire(name, args, reply),
            "rename" | "renamenx" => {
                let (from, to) = (&args[0][..], &args[1][..]);
                if self.kind(from).is_none() {
                    reply.error("ERR no such key");
                } else if name == "renamenx" && (from == to || self.kind(to).is_some()) {
                    reply.integer(0);
                } else {
                    let ttl = self.expires.remove(from);
                    let list = !self.lists.is_empty() && self.lists.remove(from);
                    if from != to {
                        self.delete(to);
                    }
                    self.store.rename(from, to);
                    if let Some(at) = ttl {
                        self.expires.insert(to.into(), at);
                    }
                    if list {
                        self.lists.insert(to.into());
                    }
                    if name == "rename" {
                        reply.simple("OK");
                    } else {
                        reply.integer(1);
                    }
                }
            }
            "persist" => {
                let had = self.kind(&args[0]).is_some() && self.expires.remove(&args[0][..]).is_some();
                reply.integer(i64::from(had));
            }
            "lpop" | "rpop" => self.pop(name, args, reply),
            "ttl" | "pttl" => {
                let n = match self.kind(&args[0]) {
                    None => -2,
                    Some(_) => match self.expires.get(&args[0][..]) {
                        None => -1,
                        Some(&at) => {
                            // Rounded to the millisecond Redis's clock has.
                            let ms = (at.saturating_duration_since(Instant::now()).as_micros() as i64 + 500) / 1000;
                            if name == "ttl" {
                                (ms + 500) / 1000
                            } else {
                                ms
                            }
                        }
                    },
                };
                reply.integer(n);
            }
            "lpush" | "rpush" => self.push(name == "lpush", args, reply),
            "lpushx" | "rpushx" | "lset" | "ltrim" | "lrem" | "linsert" | "lpos" | "lmove" | "rpoplpush" => {
                self.list_command(name, args, reply)
            }
            "getrange" | "substr" | "setrange" | "msetnx" | "incrbyfloat" => self.string_command(name, args, reply),
            "hdel" | "hexists" | "hget" | "hgetall" | "hincrby" | "hincrbyfloat" | "hkeys" | "hlen" | "hmget"
            | "hmset" | "hscan" | "hrandfield" | "hset" | "hsetnx" | "hstrlen" | "hvals" => {
                self.hash_command(name, args, reply)
            }
            "sadd" | "scard" | "sdiff" | "sdiffstore" | "sinter" | "sintercard" | "sinterstore" | "sismember"
            | "smembers" | "smismember" | "smove" | "spop" | "srandmember" | "srem" | "sscan" | "sunion"
            | "sunionstore" => self.set_command(name, args, reply),
            "zadd" | "zcard" | "zcount" | "zincrby" | "zlexcount" | "zmscore" | "zpopmax" | "zpopmin" | "zrange"
            | "zrangebylex" | "zrangebyscore" | "zrank" | "zrem" | "zremrangebylex" | "zremrangebyrank"
            | "zremrangebyscore" | "zrevrange" | "zrevrangebylex" | "zrevrangebyscore" | "zrevrank" | "zscan"
            | "zscore" => self.zset_command(name, args, reply),
            "zunion" | "zunionstore" | "zinter" | "zinterstore" | "zintercard" | "zdiff" | "zdiffstore" => {
                self.zset_combine(name, args, reply)
            }
            "zrangestore" => self.zrangestore(args, reply),
            "zrandmember" => self.zrandmember(args, reply),
            "lrange" => self.lrange(args, reply),
            "lindex" => match (self.kind(&args[0]), integer_arg(&args[1])) {
                (_, None) => reply.error(NOT_INTEGER),
                (None, _) => reply.null(),
                (Some(Kind::String | Kind::Hash | Kind::Set | Kind::ZSet), _) => reply.error(WRONGTYPE),
                (Some(Kind::List), Some(i)) => {
                    let list = self.store.get(&args[0]).unwrap_or_default();
                    let i = if i < 0 { i + list.len() as i64 } else { i };
                    match usize::try_from(i).ok().and_then(|i| list.get(i)) {
                        Some(v) => {
                            let v = v.clone();
                            self.value(reply, &v)
                        }
                        None => reply.null(),
                    }
                }
            },
            "llen" => match self.kind(&args[0]) {
                None => reply.integer(0),
                Some(Kind::String | Kind::Hash | Kind::Set | Kind::ZSet) => reply.error(WRONGTYPE),
                Some(Kind::List) => reply.integer(self.store.get(&args[0]).map_or(0, |l| l.len() as i64)),
            },
            "dbsize" => reply.integer(self.store.len() as i64),
            "keys" => self.keys(&args[0], reply),
            "scan" => self.scan(args, reply),
            "flushall" | "flushdb" => match args {
                [] => self.flush(name == "flushall", reply),
                [mode] if mode.eq_ignore_ascii_case(b"sync") || mode.eq_ignore_ascii_case(b"async") => {
                    self.flush(name == "flushall", reply)
                }
                _ => reply.error(SYNTAX),
            },
            "select" => match integer_arg(&args[0]) {
                None => reply.error(NOT_INTEGER),
                Some(n) if (0..DATABASES as i64).contains(&n) => {
                    session.db = n as usize;
                    self.use_db(session.db);
                    reply.simple("OK")
                }
                Some(_) => reply.error("ERR DB index is out of range"),
            },
            "swapdb" => match (integer_arg(&args[0]), integer_arg(&args[1])) {
                (None, _) => reply.error("ERR invalid first DB index"),
                (_, None) => reply.error("ERR invalid second DB index"),
                (Some(a), Some(b)) if (0..DATABASES as i64).contains(&a) && (0..DATABASES as i64).contains(&b) => {
                    self.swap_dbs(a as usize, b as usize);
                    reply.simple("OK")
                }
                _ => reply.error("ERR DB index is out of range"),
            },
            // Subscribed, PING answers as a message would come (RESP2).
            "ping" if self.subscribed(session.id) => {
                reply.array(2);
                reply.bulk(b"pong");
                reply.bulk(args.first().map_or(&b""[..], |a| &a[..]));
            }
            "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe" | "publish" | "pubsub" => {
                self.pubsub_command(name, session.id, args, reply)
            }
            "ping" => match args {
                [] => reply.simple("PONG"),
                [msg] => reply.bulk(msg),
                _ => reply.error(&arity_error(name)),
            },
            "echo" => reply.bulk(&args[0]),
            "info" => self.info(args, reply),
            "slowlog" => self.slowlog(args, reply),
            "config" => self.config(args, reply),
            "command" => command(args, reply),
            "client" if args[0].eq_ignore_ascii_case(b"unblock") => self.client_unblock(args, reply),
            "client" if [&b"list"[..], b"info", b"kill", b"help"].iter().any(|s| args[0].eq_ignore_ascii_case(s)) => {
                return self.client_admin(args, session, reply)
            }
            "reset" => self.reset(session, reply),
            "save" | "bgsave" | "lastsave" => self.persistence_command(name, args, reply),
            "shutdown" => return self.shutdown(args, reply),
            "monitor" => {
                self.start_monitor(session);
                reply.simple("OK")
            }
            "client" => client(args, session, reply),
            _ if blocking::BLOCKING_COMMANDS.contains(&name) => {
                return self.blocking_command(name, &cmd.args, session, reply)
            }
            "object" => self.object(args, reply),
            "move" | "copy" => self.move_or_copy(name == "copy", args, reply),
            "memory" => self.memory(args, reply),
            "hello" => self.hello(args, session, reply),
            "auth" => {
                let (user, password): (&[u8], &[u8]) = match args {
                    [password] => (b"default", password),
                    [user, password] => (user, password),
                    _ => {
                        reply.error(SYNTAX);
                        return After::Continue;
                    }
                };
                if args.len() == 1 && self.requirepass.is_none() {
                    reply.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
                } else if self.password_ok(user, password) {
                    session.authenticated = true;
                    reply.simple("OK");
                } else {
                    reply.error(WRONGPASS);
                }
            }
            "quit" => {
                reply.simple("OK");
                return After::Close;
            }
            _ => reply.error(&unknown_command(cmd)),
        }
        After::Continue
    }

    /// FLUSHALL (`all`: every database) and FLUSHDB (the current one).
    fn flush(&mut self, all: bool, reply: &mut Reply<RcBuf>) {
        self.candidates.clear();
        let clear = |db: &mut RespDb| {
            let store = &db.store;
            db.watchers.touched_where(|k| store.get(k).is_some() || store.collection(k).is_some());
            db.store.clear();
            db.lists.clear();
            db.expires.clear();
        };
        if all {
            self.for_each_db(clear);
        } else {
            clear(self);
        }
        reply.simple("OK");
    }

    /// `SET key value [NX|XX] [GET] [EX s|PX ms|KEEPTTL]`, parsed as
    /// Redis 7.0's `parseExtendedStringArgumentsOrReply` does.
    /// SET and the commands that are SET with options (`name` for errors).
    fn set(&mut self, name: &str, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let (key, value) = (&args[0][..], &args[1][..]);
        let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
        let mut ttl: Option<(TtlUnit, &[u8])> = None;
        let mut i = 2;
        while i < args.len() {
            let opt = &args[i][..];
            let next = args.get(i + 1);
            let is = |s: &[u8]| opt.eq_ignore_ascii_case(s);
            if is(b"nx") && !xx {
                nx = true;
            } else if is(b"xx") && !nx {
                xx = true;
            } else if is(b"get") {
                get = true;
            } else if is(b"keepttl") && ttl.is_none() {
                keepttl = true;
            } else if let Some((unit, n)) = TtlUnit::of(opt).zip(next).filter(|_| !keepttl && ttl.is_none()) {
                ttl = Some((unit, &n[..]));
                i += 1;
            } else {
                return reply.error(SYNTAX);
            }
            i += 1;
        }
        let deadline = match ttl {
            None => None,
            Some((unit, n)) => match deadline(unit, n, name) {
                Ok(at) => Some(at),
                Err(e) => return reply.error(&e),
            },
        };
        let kind = self.kind(key);
        let old = match kind {
            Some(Kind::List | Kind::Hash | Kind::Set | Kind::ZSet) if get => return reply.error(WRONGTYPE),
            Some(_) => self.store.get(key).and_then(|v| v.first()).cloned(),
            None => None,
        };
        let exists = kind.is_some();
        if (nx && exists) || (xx && !exists) {
            return match (get, old) {
                (true, Some(v)) => self.value(reply, &v),
                _ => reply.null(),
            };
        }
        let kept = if keepttl { self.expires.get(key).copied() } else { None };
        if let Err(s) = self.set_string(key, value) {
            return reply.error(status_error(s));
        }
        if let Some(at) = deadline.or(kept) {
            self.expires.insert(key.into(), at);
        }
        match (get, old) {
            (false, _) => reply.simple("OK"),
            (true, Some(v)) => self.value(reply, &v),
            (true, None) => reply.null(),
        }
    }

    /// GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]: the value,
    /// and its expiry set or removed.
    fn getex(&mut self, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        let change = match &args[1..] {
            [] => None,
            [opt] if opt.eq_ignore_ascii_case(b"persist") => Some(None),
            [opt, n] => match TtlUnit::of(opt) {
                Some(unit) => match deadline(unit, n, "getex") {
                    Ok(at) => Some(Some(at)),
                    Err(e) => return reply.error(&e),
                },
                None => return reply.error(SYNTAX),
            },
            _ => return reply.error(SYNTAX),
        };
        let v = match self.string(key) {
            Ok(Some(v)) => v.clone(),
            Ok(None) => {
                self.counters.keyspace_misses += 1;
                return reply.null();
            }
            Err(e) => return reply.error(e),
        };
        self.counters.keyspace_hits += 1;
        self.value(reply, &v);
        match change {
            None => {}
            Some(None) => {
                self.expires.remove(key);
            }
            Some(Some(at)) => self.expires.insert(key.into(), at),
        }
    }

    /// INCR, DECR, INCRBY, DECRBY: adds `delta` to the integer string of
    /// `key` (0 when missing).
    fn incr_by(&mut self, key: &[u8], delta: i64, reply: &mut Reply<RcBuf>) {
        let current = match self.string(key) {
            Err(e) => return reply.error(e),
            Ok(None) => 0,
            Ok(Some(v)) => match integer_arg(v) {
                Some(n) => n,
                None => return reply.error(NOT_INTEGER),
            },
        };
        let Some(next) = current.checked_add(delta) else {
            return reply.error("ERR increment or decrement would overflow");
        };
        match self.replace_string(key, next.to_string().as_bytes()) {
            Ok(()) => reply.integer(next),
            Err(s) => reply.error(status_error(s)),
        }
    }

    /// Sets the string `key` holds to `value`, keeping its time to live
    /// (INCR and INCRBYFLOAT do).
    fn replace_string(&mut self, key: &[u8], value: &[u8]) -> Result<(), Status> {
        let ttl = self.expires.get(key).copied();
        self.set_string(key, value)?;
        if let Some(at) = ttl {
            self.expires.insert(key.into(), at);
        }
        Ok(())
    }

    /// `EXPIRE key seconds [NX|XX|GT|LT]` (and PEXPIRE, in milliseconds),
    /// checked in the order Redis 7.0's `expireGenericCommand` checks: a
    /// time already past deletes the key.
    fn expire(&mut self, name: &str, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for opt in &args[2..] {
            match opt.to_ascii_lowercase().as_slice() {
                b"nx" => nx = true,
                b"xx" => xx = true,
                b"gt" => gt = true,
                b"lt" => lt = true,
                _ => return reply.error(&format!("ERR Unsupported option {}", lossy(opt))),
            }
        }
        if nx && (xx || gt || lt) {
            return reply.error("ERR NX and XX, GT or LT options at the same time are not compatible");
        }
        if gt && lt {
            return reply.error("ERR GT and LT options at the same time are not compatible");
        }
        let Some(n) = integer_arg(&args[1]) else { return reply.error(NOT_INTEGER) };
        let invalid = format!("ERR invalid expire time in '{name}' command");
        let seconds = name == "expire" || name == "expireat";
        let Some(ms) = (if seconds { n.checked_mul(1000) } else { Some(n) }) else {
            return reply.error(&invalid);
        };
        let wall_ms = unix_ms();
        // A Unix time (EXPIREAT, PEXPIREAT) becomes milliseconds from now;
        // for a time to live, Redis adds the wall clock and refuses an
        // overflow.
        let ms = if name.ends_with("at") {
            ms.saturating_sub(wall_ms)
        } else if ms.checked_add(wall_ms).is_none() {
            return reply.error(&invalid);
        } else {
            ms
        };
        let key = &args[0][..];
        if self.kind(key).is_none() {
            return reply.integer(0);
        }
        let now = Instant::now();
        // Milliseconds from now of the current expiry; `None`: persistent.
        let current = self.expires.get(key).map(|&at| at.saturating_duration_since(now).as_millis() as i64);
        let refused = (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|c| ms <= c))
            || (lt && current.is_some_and(|c| ms >= c));
        if refused {
            return reply.integer(0);
        }
        if ms <= 0 {
            self.delete(key);
        } else {
            let at =
                now.checked_add(Duration::from_millis(ms as u64)).unwrap_or_else(|| now + Duration::from_secs(1 << 40));
            self.expires.insert(key.into(), at);
        }
        reply.integer(1)
    }

    /// `LPOP key [count]`, `RPOP key [count]`.
    fn pop(&mut self, name: &str, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let count = match args {
            [_] => None,
            [_, n] => match integer_arg(n).filter(|&n| n >= 0) {
                Some(n) => Some(n as usize),
                None => return reply.error("ERR value is out of range, must be positive"),
            },
            _ => return reply.error(&arity_error(name)),
        };
        let key = &args[0][..];
        match self.kind(key) {
            None if count.is_some() => return reply.null_array(),
            None => return reply.null(),
            Some(Kind::String | Kind::Hash | Kind::Set | Kind::ZSet) => return reply.error(WRONGTYPE),
            Some(Kind::List) => {}
        }
        let front = name == "lpop";
        let take = |db: &mut Self| db.store.pop(key, front);
        match count {
            None => {
                if let Some(v) = take(self) {
                    self.value(reply, &v);
                }
            }
            Some(n) => {
                let n = n.min(self.store.get(key).map_or(0, |l| l.len()));
                reply.array(n);
                for _ in 0..n {
                    if let Some(v) = take(self) {
                        self.value(reply, &v);
                    }
                }
            }
        }
        if self.store.get(key).is_none() {
            // The list went with its last element.
            self.delete(key);
        }
    }

    fn push(&mut self, front: bool, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        if matches!(self.kind(key), Some(Kind::String | Kind::Hash | Kind::Set | Kind::ZSet)) {
            return reply.error(WRONGTYPE);
        }
        for elem in &args[1..] {
            let pushed = if front { self.store.prepend(key, elem) } else { self.store.append(key, elem) };
            if let Err(s) = pushed {
                // The elements before stay pushed, as in Redis when memory
                // runs out part way.
                self.lists.insert(key.into());
                return reply.error(status_error(s));
            }
        }
        self.lists.insert(key.into());
        reply.integer(self.store.get(key).map_or(0, |l| l.len() as i64));
    }

    fn lrange(&mut self, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let (Some(start), Some(stop)) = (integer_arg(&args[1]), integer_arg(&args[2])) else {
            return reply.error(NOT_INTEGER);
        };
        match self.kind(&args[0]) {
            None => return reply.array(0),
            Some(Kind::String | Kind::Hash | Kind::Set | Kind::ZSet) => return reply.error(WRONGTYPE),
            Some(Kind::List) => {}
        }
        let list = self.store.get(&args[0]).unwrap_or_default();
        let len = list.len() as i64;
        let start = if start < 0 { (len + start).max(0) } else { start };
        let stop = if stop < 0 { len + stop } else { stop.min(len - 1) };
        if start > stop || start >= len {
            return reply.array(0);
        }
        let (start, count) = (start as usize, (stop - start + 1) as usize);
        reply.array(count);
        for v in list.iter().skip(start).take(count) {
            if v.len() >= self.threshold {
                reply.bulk_value(v.clone());
            } else {
                reply.bulk(v);
            }
        }
    }

    fn info(&mut self, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let wants = |section: &str| {
            args.is_empty()
                || args.iter().any(|a| {
                    a.eq_ignore_ascii_case(section.as_bytes())
                        || a.eq_ignore_ascii_case(b"all")
                        || a.eq_ignore_ascii_case(b"everything")
                        || a.eq_ignore_ascii_case(b"default")
                })
        };
        let mut text = String::new();
        if wants("server") {
            text.push_str(&format!(
                "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nserver_name:cornflakes-kv\r\nmultiplexing_api:io_uring\r\nprocess_id:{}\r\nuptime_in_seconds:{}\r\n",
                std::process::id(),
                self.started.elapsed().as_secs()
            ));
        }
        let section = |text: &mut String, body: String| {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            text.push_str(&body);
        };
        let c = self.counters;
        if wants("clients") {
            section(
                &mut text,
                format!(
                    "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\n\
                     blocked_clients:{}\r\ntracking_clients:0\r\nclients_in_timeout_table:{}\r\n",
                    c.connected_clients,
                    c.max_clients,
                    self.blocked_clients(),
                    self.blocked_with_timeout()
                ),
            );
        }
        if wants("memory") {
            // Keys and values (what maxmemory counts), then the pinned pool
            // they live in, which grows and is not given back.
            let used = self.used_bytes();
            let pool = self.store.pool().stats().mapped_bytes;
            let rss = resident_bytes();
            section(
                &mut text,
                format!(
                    "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_dataset:{used}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\npool_mapped_bytes:{pool}\r\npool_mapped_human:{}\r\n",
                    bytes_to_human(used),
                    bytes_to_human(rss),
                    self.maxmemory,
                    bytes_to_human(self.maxmemory),
                    self.policy.name(),
                    bytes_to_human(pool)
                ),
            );
        }
        if wants("stats") {
            section(
                &mut text,
                format!(
                    "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\ntotal_error_replies:{}\r\n",
                    c.total_connections,
                    c.total_commands,
                    c.expired_keys,
                    c.evicted_keys,
                    c.keyspace_hits,
                    c.keyspace_misses,
                    self.command_stats.error_replies()
                ),
            );
        }
        if wants("persistence") {
            let body = self.persistence_info();
            section(&mut text, body);
        }
        if wants("cpu") {
            let [user, sys, child_user, child_sys] = cpu_seconds("/proc/self/stat");
            let [main_user, main_sys, _, _] = cpu_seconds("/proc/thread-self/stat");
            section(
                &mut text,
                format!(
                    "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{child_sys:.6}\r\n\
                     used_cpu_user_children:{child_user:.6}\r\nused_cpu_sys_main_thread:{main_sys:.6}\r\n\
                     used_cpu_user_main_thread:{main_user:.6}\r\n"
                ),
            );
        }
        if wants("replication") {
            section(&mut text, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n".to_owned());
        }
        // Not in the default sections, as in Redis.
        let named = |section: &str| {
            args.iter().any(|a| {
                a.eq_ignore_ascii_case(section.as_bytes())
                    || a.eq_ignore_ascii_case(b"all")
                    || a.eq_ignore_ascii_case(b"everything")
            })
        };
        if named("commandstats") {
            let body = self.commandstats_info();
            section(&mut text, body);
        }
        if wants("errorstats") {
            let body = self.errorstats_info();
            section(&mut text, body);
        }
        if wants("keyspace") {
            let mut body = String::from("# Keyspace\r\n");
            for n in 0..DATABASES {
                let (keys, expires) = self.db_counts(n);
                if keys > 0 {
                    body.push_str(&format!("db{n}:keys={keys},expires={expires},avg_ttl=0\r\n"));
                }
            }
            section(&mut text, body);
        }
        reply.bulk(text.as_bytes());
    }

    fn config(&mut self, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        if args[0].eq_ignore_ascii_case(b"set") {
            return self.config_set(&args[1..], reply);
        }
        if args[0].eq_ignore_ascii_case(b"resetstat") {
            if args.len() != 1 {
                return reply.error(&arity_error("config|resetstat"));
            }
            return self.reset_stats(reply);
        }
        if !args[0].eq_ignore_ascii_case(b"get") {
            return reply.error(&unknown_subcommand("config", &args[0]));
        }
        if args.len() < 2 {
            return reply.error(&arity_error("config|get"));
        }
        // What clients ask at start (redis-benchmark: save, appendonly), and
        // the limits an operator checks.
        let (maxmemory, maxclients) = (self.maxmemory.to_string(), self.counters.max_clients.to_string());
        let samples = self.samples.to_string();
        let requirepass = String::from_utf8_lossy(self.requirepass.as_deref().unwrap_or_default()).into_owned();
        // Redis prints the directory it has changed to: an absolute path.
        let dir = std::fs::canonicalize(&self.persistence.dir).unwrap_or_else(|_| self.persistence.dir.clone());
        let dir = dir.to_string_lossy();
        let save = self.save_points_text();
        let (slower, slow_len) = (self.slowlog.slower_than_us().to_string(), self.slowlog.max_len.to_string());
        let known: [(&str, &str); 14] = [
            ("appendonly", "no"),
            ("databases", "16"),
            ("dbfilename", &self.persistence.dbfilename),
            ("dir", &dir),
            ("maxclients", &maxclients),
            ("maxmemory", &maxmemory),
            ("maxmemory-policy", self.policy.name()),
            ("maxmemory-samples", &samples),
            ("proto-max-bulk-len", "1048576"),
            ("requirepass", &requirepass),
            ("save", &save),
            ("slowlog-log-slower-than", &slower),
            ("slowlog-max-len", &slow_len),
            ("timeout", "0"),
        ];
        let found: Vec<(&str, &str)> = known
            .iter()
            .filter(|(k, _)| args[1..].iter().any(|p| glob_match(&p.to_ascii_lowercase(), k.as_bytes())))
            .copied()
            .collect();
        reply.array(found.len() * 2);
        for (k, v) in found {
            reply.bulk(k.as_bytes());
            reply.bulk(v.as_bytes());
        }
    }

    /// `CONFIG SET maxmemory <bytes>[k|kb|m|mb|g|gb]`, `maxmemory-policy`,
    /// `maxmemory-samples`, `requirepass`; all or nothing.
    fn config_set(&mut self, pairs: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
            return reply.error(&arity_error("config|set"));
        }
        let mut maxmemory = None;
        let mut requirepass = None;
        let mut policy = None;
        let mut samples = None;
        let mut save = None;
        let (mut slower, mut slow_len) = (None, None);
        for (i, kv) in pairs.chunks(2).enumerate() {
            let (name, value) = (kv[0].to_ascii_lowercase(), &kv[1]);
            let failed =
                |why: &str| format!("ERR CONFIG SET failed (possibly related to argument '{}') - {why}", lossy(&name));
            if pairs.chunks(2).take(i).any(|earlier| earlier[0].eq_ignore_ascii_case(&name)) {
                return reply.error(&failed("duplicate parameter"));
            }
            match name.as_slice() {
                b"maxmemory" => match memory_value(value) {
                    Some(n) => maxmemory = Some(n),
                    None => return reply.error(&failed("argument must be a memory value")),
                },
                b"requirepass" => requirepass = Some(value.to_vec()),
                // Where files are written is set at start only (`cf
                // kv-server --dir --dbfilename`), as Redis 7.0 protects
                // them by default (CONFIG SET dir is how a client would
                // write files anywhere).
                b"dir" | b"dbfilename" => return reply.error(&failed("can't set protected config")),
                b"save" => match std::str::from_utf8(value).ok().and_then(persistence::parse_save_points) {
                    Some(points) => save = Some(points),
                    None => return reply.error(&failed("Invalid save parameters")),
                },
                b"maxmemory-policy" => match EvictionPolicy::from_name(value) {
                    Some(p) => policy = Some(p),
                    None => return reply.error(&failed("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction")),
                },
                b"slowlog-log-slower-than" => match integer_arg(value) {
                    Some(n) if n >= -1 => slower = Some(n),
                    Some(_) => return reply.error(&failed("argument must be between -1 and 9223372036854775807 inclusive")),
                    None => return reply.error(&failed("argument couldn't be parsed into an integer")),
                },
                b"slowlog-max-len" => match integer_arg(value) {
                    Some(n) if (0..=i64::from(i32::MAX)).contains(&n) => slow_len = Some(n as usize),
                    Some(_) => return reply.error(&failed("argument must be between 0 and 9223372036854775807 inclusive")),
                    None => return reply.error(&failed("argument couldn't be parsed into an integer")),
                },
                b"maxmemory-samples" => match integer_arg(value) {
                    None => return reply.error(&failed("argument couldn't be parsed into an integer")),
                    Some(n) if usize::try_from(n).is_ok_and(|n| evict::SAMPLES.contains(&n)) => samples = Some(n as usize),
                    Some(_) => return reply.error(&failed("argument must be between 1 and 2147483647 inclusive")),
                },
                _ => {
                    return reply.error(&format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                        lossy(&kv[0])
                    ))
                }
            }
        }
        if let Some(n) = maxmemory {
            self.maxmemory = n;
        }
        if let Some(p) = requirepass {
            self.set_requirepass(Some(&p));
        }
        if let Some(p) = policy {
            self.set_maxmemory_policy(p);
        }
        if let Some(n) = samples {
            self.samples = n;
        }
        if let Some(points) = save {
            self.persistence.save_points = points;
        }
        if let Some(n) = slower {
            self.slowlog.set_slower_than_us(n);
        }
        if let Some(n) = slow_len {
            self.slowlog.set_max_len(n);
        }
        reply.simple("OK");
    }

    /// `CONFIG RESETSTAT`: the counters INFO stats, commandstats and
    /// errorstats show start again from 0, as in Redis.
    fn reset_stats(&mut self, reply: &mut Reply<RcBuf>) {
        let c = &mut self.counters;
        (c.total_connections, c.total_commands, c.expired_keys, c.evicted_keys) = (0, 0, 0, 0);
        (c.keyspace_hits, c.keyspace_misses) = (0, 0);
        self.command_stats.reset();
        reply.simple("OK");
    }

    /// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]`, as Redis's: the
    /// cursor names a class of the keys' hashes (see
    /// [`Store::scan_step`]), a key present for the whole iteration is
    /// returned at least once (more only when the store grew meanwhile),
    /// and a call visits classes until it has COUNT keys or has looked at
    /// 10 x COUNT classes: O(COUNT), whatever the number of keys.
    fn scan(&mut self, args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let Some(cursor) = std::str::from_utf8(&args[0]).ok().and_then(|c| c.parse::<u64>().ok()) else {
            return reply.error("ERR invalid cursor");
        };
        let (mut pattern, mut count, mut kind): (Option<&[u8]>, usize, Option<&[u8]>) = (None, 10, None);
        let mut opts = args[1..].chunks(2);
        for opt in &mut opts {
            match opt {
                [o, v] if o.eq_ignore_ascii_case(b"match") => pattern = Some(v),
                [o, v] if o.eq_ignore_ascii_case(b"count") => match integer_arg(v) {
                    None => return reply.error(NOT_INTEGER),
                    Some(n) if n < 1 => return reply.error(SYNTAX),
                    Some(n) => count = usize::try_from(n).unwrap_or(usize::MAX),
                },
                [o, v] if o.eq_ignore_ascii_case(b"type") => kind = Some(v),
                _ => return reply.error(SYNTAX),
            }
        }
        let now = Instant::now();
        let mut found: Vec<Box<[u8]>> = Vec::new();
        let next = scan_steps(cursor, count, |c| {
            let next = self.store.scan_step(c, |k| found.push(k.into()));
            (next, found.len())
        });
        // The filters come after the visit, as in Redis (a call may then
        // return fewer keys than COUNT, or none, with a cursor to go on).
        found.retain(|k| {
            self.expires.get(&k[..]).is_none_or(|&at| at > now)
                && pattern.is_none_or(|p| glob_match(p, k))
                && kind
                    .is_none_or(|t| self.kind_now(k).is_some_and(|kind| t.eq_ignore_ascii_case(kind.name().as_bytes())))
        });
        reply.array(2);
        reply.bulk(next.to_string().as_bytes());
        reply.array(found.len());
        for k in found {
            reply.bulk(&k);
        }
    }

    /// `KEYS pattern`: every live key matching Redis's glob. O(keys), as in
    /// Redis.
    fn keys(&mut self, pattern: &[u8], reply: &mut Reply<RcBuf>) {
        let now = Instant::now();
        let expired = |k: &[u8]| !self.expires.is_empty() && self.expires.get(k).is_some_and(|&at| at <= now);
        let all = pattern == b"*";
        let found: Vec<&[u8]> = self.store.keys().filter(|k| (all || glob_match(pattern, k)) && !expired(k)).collect();
        reply.array(found.len());
        for k in found {
            reply.bulk(k);
        }
    }
}

/// Bytes as Redis's INFO writes them: `512B`, `1.50K`, `2.00M`, `3.25G`.
fn bytes_to_human(n: usize) -> String {
    let f = n as f64;
    match n {
        0..1024 => format!("{n}B"),
        1024..1_048_576 => format!("{:.2}K", f / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.2}M", f / 1_048_576.0),
        _ => format!("{:.2}G", f / 1_073_741_824.0),
    }
}

/// A memory amount as Redis's configuration takes it: digits and an
/// optional unit, `k`/`m`/`g` (powers of 1000) or `kb`/`mb`/`gb` (of
/// 1024), any case.
///
/// ```
/// use cornflakes_kv::resp::memory_value;
///
/// assert_eq!(memory_value(b"100mb"), Some(100 << 20));
/// assert_eq!(memory_value(b"2G"), Some(2_000_000_000));
/// assert_eq!(memory_value(b"12"), Some(12));
/// assert_eq!(memory_value(b"1.5gb"), None);
/// assert_eq!(memory_value(b"mb"), None);
/// ```
pub fn memory_value(v: &[u8]) -> Option<usize> {
    let digits = v.iter().take_while(|b| b.is_ascii_digit()).count();
    let n: usize = std::str::from_utf8(&v[..digits]).ok()?.parse().ok()?;
    let unit: usize = match v[digits..].to_ascii_lowercase().as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(unit)
}

/// Redis's glob (`*`, `?`, `[abc]`, `[^a-z]`, `\\` escaping the next
/// byte), for KEYS and CONFIG GET. Linear in the text for each `*` of the
/// pattern (it backtracks to the last `*` only), so no pattern can make
/// it exponential.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // After the last `*`: where the pattern resumes and the text position
    // it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            if pattern[p] == b'*' {
                star = Some((p + 1, t));
                p += 1;
                continue;
            }
            if let Some(next) = glob_one(pattern, p, text[t]) {
                p = next;
                t += 1;
                continue;
            }
        }
        match star {
            Some((resume, tried)) => {
                p = resume;
                t = tried + 1;
                star = Some((resume, tried + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// Whether the one-byte element of `pattern` at `p` (not `*`) matches `c`;
/// the index after it when it does.
fn glob_one(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    match pattern[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == c).then_some(p + 2),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut hit = false;
            // An unclosed class ends with the pattern, as in Redis.
            while i < pattern.len() && pattern[i] != b']' {
                if pattern[i] == b'\\' && i + 1 < pattern.len() {
                    hit |= pattern[i + 1] == c;
                    i += 2;
                } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' {
                    let (a, b) = (pattern[i].min(pattern[i + 2]), pattern[i].max(pattern[i + 2]));
                    hit |= (a..=b).contains(&c);
                    i += 3;
                } else {
                    hit |= pattern[i] == c;
                    i += 1;
                }
            }
            (hit != negate).then_some((i + 1).min(pattern.len()))
        }
        b => (b == c).then_some(p + 1),
    }
}

fn command_info(reply: &mut Reply<RcBuf>, (name, arity, flags): (&str, i64, &[&str])) {
    let keyed = flags.contains(&"readonly") || flags.contains(&"write");
    // Redis's first key, last key (-1: the last argument) and step; keys
    // after a count are movable, and listed as none.
    let (first, last, step) = match name {
        _ if flags.contains(&"movablekeys") && !name.ends_with("store") => (0, 0, 0),
        "mget" | "del" | "exists" | "sinter" | "sunion" | "sdiff" | "sinterstore" | "sunionstore" | "sdiffstore" => {
            (1, -1, 1)
        }
        "smove" | "zrangestore" => (1, 2, 1),
        "mset" => (1, -1, 2),
        _ if keyed => (1, 1, 1),
        _ => (0, 0, 0),
    };
    reply.array(6);
    reply.bulk(name.as_bytes());
    reply.integer(arity);
    reply.array(flags.len());
    for f in flags {
        reply.simple(f);
    }
    reply.integer(first);
    reply.integer(last);
    reply.integer(step);
}

fn command(args: &[std::borrow::Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
    match args.first() {
        None => {
            reply.array(COMMANDS.len());
            for &c in COMMANDS {
                command_info(reply, c);
            }
        }
        Some(sub) if sub.eq_ignore_ascii_case(b"count") => reply.integer(COMMANDS.len() as i64),
        // redis-cli asks for the docs to show hints; without them it uses
        // its own table.
        Some(sub) if sub.eq_ignore_ascii_case(b"docs") => reply.array(0),
        Some(sub) if sub.eq_ignore_ascii_case(b"info") => {
            reply.array(args.len() - 1);
            for a in &args[1..] {
                match COMMANDS.iter().find(|c| c.0.as_bytes().eq_ignore_ascii_case(a)) {
                    Some(&c) => command_info(reply, c),
                    None => reply.null(),
                }
            }
        }
        Some(sub) => reply.error(&unknown_subcommand("command", sub)),
    }
}

fn client(args: &[std::borrow::Cow<'_, [u8]>], session: &mut Session, reply: &mut Reply<RcBuf>) {
    let sub = &args[0];
    if sub.eq_ignore_ascii_case(b"setname") {
        let [_, name] = args else { return reply.error(&arity_error("client|setname")) };
        if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return reply.error("ERR Client names cannot contain spaces, newlines or special characters.");
        }
        session.name = (!name.is_empty()).then(|| name.to_vec());
        reply.simple("OK");
    } else if sub.eq_ignore_ascii_case(b"getname") {
        match &session.name {
            Some(n) => reply.bulk(n),
            None => reply.null(),
        }
    } else if sub.eq_ignore_ascii_case(b"id") {
        reply.integer(session.id as i64);
    } else {
        reply.error(&unknown_subcommand("client", sub));
    }
}

/// `HELLO [2 [SETNAME name]]`; any other version is Redis's `NOPROTO`
/// (this server speaks RESP2 only).
/// A password compared in time that does not depend on where it differs.
fn same_secret(want: &[u8], got: &[u8]) -> bool {
    want.len() == got.len() && want.iter().zip(got).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

impl RespDb {
    /// `HELLO [protover [AUTH user password] [SETNAME name]]`.
    fn hello(&mut self, args: &[std::borrow::Cow<'_, [u8]>], session: &mut Session, reply: &mut Reply<RcBuf>) {
        let mut name = None;
        let mut auth = None;
        if let Some(ver) = args.first() {
            match integer_arg(ver) {
                None => return reply.error("ERR Protocol version is not an integer or out of range"),
                Some(2) => {}
                Some(_) => return reply.error("NOPROTO unsupported protocol version"),
            }
            let mut i = 1;
            while i < args.len() {
                if args[i].eq_ignore_ascii_case(b"setname") && i + 1 < args.len() {
                    name = Some(args[i + 1].to_vec());
                    i += 2;
                } else if args[i].eq_ignore_ascii_case(b"auth") && i + 2 < args.len() {
                    auth = Some((&args[i + 1][..], &args[i + 2][..]));
                    i += 3;
                } else {
                    return reply.error(&format!("ERR Syntax error in HELLO option '{}'", lossy(&args[i])));
                }
            }
        }
        match auth {
            Some((user, password)) if !self.password_ok(user, password) => return reply.error(WRONGPASS),
            Some(_) => session.authenticated = true,
            None if self.requirepass.is_some() && !session.authenticated => {
                return reply.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
            }
            None => {}
        }
        if name.is_some() {
            session.name = name;
        }
        hello_reply(session, reply);
    }
}

fn hello_reply(session: &Session, reply: &mut Reply<RcBuf>) {
    reply.array(14);
    for (k, v) in [("server", "redis"), ("version", "7.0.0")] {
        reply.bulk(k.as_bytes());
        reply.bulk(v.as_bytes());
    }
    reply.bulk(b"proto");
    reply.integer(2);
    reply.bulk(b"id");
    reply.integer(session.id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        reply.bulk(k.as_bytes());
        reply.bulk(v.as_bytes());
    }
    reply.bulk(b"modules");
    reply.array(0);
}

/// The process's resident memory in bytes (`VmRSS` of `/proc/self/status`;
/// 0 where it cannot be read).
fn resident_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok());
    kib.unwrap_or(0) * 1024
}

/// CPU seconds `(user, system, children's user, children's system)` of
/// the process (`/proc/self/stat`) or of this thread
/// (`/proc/thread-self/stat`, no children), for INFO cpu; zeros where
/// `/proc` cannot be read. The kernel reports them in USER_HZ ticks,
/// 1/100 s on Linux whatever the kernel's HZ.
fn cpu_seconds(path: &str) -> [f64; 4] {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may
    // hold spaces: utime, stime, cutime and cstime are fields 14-17.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0) as f64 / 100.0;
    [tick(11), tick(12), tick(13), tick(14)]
}

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
