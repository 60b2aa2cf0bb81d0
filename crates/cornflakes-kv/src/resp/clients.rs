//! What the server knows of its connections, for CLIENT LIST, CLIENT INFO
//! and CLIENT KILL, as Redis 7.0 has them: each connection's addresses,
//! age, idle time, last command, database, name and flags (`O` monitor,
//! `P` subscribed, `x` in MULTI, `b` blocked). Redis's memory fields (`qbuf`, `omem`,
//! `tot-mem`, ...) are listed as 0: this server does not count them per
//! connection (`multi-mem` is the bytes MULTI has queued).
//!
//! RESET too: it returns a connection to how it began.
//!
//! The serving loop registers each connection
//! ([`RespDb::client_connected`]), gives the batch's time
//! ([`RespDb::tick`], in the parent module), and closes the connections CLIENT KILL names
//! ([`RespDb::take_killed`]).

use std::borrow::Cow;
use std::fmt::Write;
use std::net::SocketAddr;
use std::time::Instant;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;
use hashbrown::HashMap;

use super::{integer_arg, lossy, After, RespDb, Session, SYNTAX};

/// A connection's addresses and socket, as the datapath knows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientAddrs {
    /// The client's address (`addr=`).
    pub peer: Option<SocketAddr>,
    /// The server's address it connected to (`laddr=`).
    pub local: Option<SocketAddr>,
    /// Its socket's file descriptor (`fd=`; -1 when it has none).
    pub fd: Option<i32>,
}

/// One connection, as of the end of its last command.
#[derive(Debug)]
struct Client {
    addrs: ClientAddrs,
    created: Instant,
    last: Instant,
    /// Its last command, and the subcommand of a command that has them
    /// (Redis names them `client|list`).
    cmd: &'static str,
    sub: String,
    name: Option<Vec<u8>>,
    db: usize,
    /// Commands queued in MULTI (`None`: not in one), and their bytes.
    multi: Option<(usize, usize)>,
}

/// Every registered connection, and those CLIENT KILL named.
#[derive(Debug)]
pub(super) struct Clients {
    by_id: HashMap<u64, Client>,
    killed: Vec<u64>,
    /// The current batch's time (Redis's cached clock).
    now: Instant,
}

impl Default for Clients {
    fn default() -> Self {
        Clients { by_id: HashMap::new(), killed: Vec::new(), now: Instant::now() }
    }
}

/// The commands whose subcommand Redis names with them (`config|get`).
pub(super) const CONTAINERS: &[&str] = &["client", "command", "config", "memory", "object", "pubsub", "slowlog"];

impl Clients {
    /// Records that `session` ran command `name` (`None`: one this server
    /// does not have) with `args` (the name first).
    pub(super) fn ran(&mut self, session: &Session, name: Option<&'static str>, args: &[Cow<'_, [u8]>]) {
        if self.by_id.is_empty() {
            return;
        }
        let Some(c) = self.by_id.get_mut(&session.id) else { return };
        c.last = self.now;
        c.cmd = name.unwrap_or("NULL");
        c.sub.clear();
        if CONTAINERS.contains(&c.cmd) {
            let word = |w: &[u8]| w.len() <= 32 && w.iter().all(|b| b.is_ascii_alphabetic() || *b == b'-');
            if let Some(sub) = args.get(1).filter(|s| word(s)) {
                c.sub.extend(sub.iter().map(|b| b.to_ascii_lowercase() as char));
            }
        }
        c.db = session.db;
        c.multi = session.multi.as_ref().map(|t| (t.queued.len(), t.bytes));
        if c.name != session.name {
            c.name.clone_from(&session.name);
        }
    }

    /// The time the commands that follow run at.
    pub(super) fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    /// Forgets connection `id` (it has gone).
    pub(super) fn remove(&mut self, id: u64) {
        if !self.by_id.is_empty() {
            self.by_id.remove(&id);
        }
    }
}

/// Who CLIENT KILL or CLIENT LIST selects.
#[derive(Default)]
struct Filter<'a> {
    id: Option<u64>,
    pubsub: Option<bool>,
    addr: Option<&'a [u8]>,
    laddr: Option<&'a [u8]>,
    skip_me: bool,
}

impl Filter<'_> {
    /// Selects no one (no connection has id 0).
    const NOBODY: Filter<'static> = Filter { id: Some(0), pubsub: None, addr: None, laddr: None, skip_me: false };
}

/// Redis's client types: `Some(true)` pubsub, `Some(false)` normal; master
/// and replica connections (none here) `None`.
fn client_type(name: &[u8]) -> Result<Option<bool>, String> {
    match name.to_ascii_lowercase().as_slice() {
        b"normal" => Ok(Some(false)),
        b"pubsub" => Ok(Some(true)),
        b"master" | b"replica" | b"slave" => Ok(None),
        _ => Err(format!("ERR Unknown client type '{}'", lossy(name))),
    }
}

/// `addr=` as Redis prints it (`?:0` when not known).
fn address(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "?:0".to_owned(), |a| a.to_string())
}

impl RespDb {
    /// Registers connection `id` (a new session) with its addresses.
    pub fn client_connected(&mut self, id: u64, addrs: ClientAddrs) {
        let now = self.clients.now;
        let client =
            Client { addrs, created: now, last: now, cmd: "NULL", sub: String::new(), name: None, db: 0, multi: None };
        self.clients.by_id.insert(id, client);
    }

    /// The connections CLIENT KILL named since the last call, for the
    /// serving loop to close (their sessions already ended).
    pub fn take_killed(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.clients.killed)
    }

    /// Whether CLIENT KILL named connections not closed yet.
    pub fn has_killed(&self) -> bool {
        !self.clients.killed.is_empty()
    }

    /// `CLIENT LIST [TYPE type | ID id ...]`, `CLIENT INFO`, `CLIENT KILL`
    /// and `CLIENT HELP` (`args` from the subcommand on).
    pub(super) fn client_admin(
        &mut self,
        args: &[Cow<'_, [u8]>],
        session: &Session,
        reply: &mut Reply<RcBuf>,
    ) -> After {
        let sub = args[0].to_ascii_lowercase();
        match sub.as_slice() {
            b"list" => {
                let filter = match &args[1..] {
                    [] => Filter::default(),
                    [t, name] if t.eq_ignore_ascii_case(b"type") => match client_type(name) {
                        Ok(Some(pubsub)) => Filter { pubsub: Some(pubsub), ..Filter::default() },
                        Ok(None) => Filter::NOBODY,
                        Err(e) => return error(reply, &e),
                    },
                    [t, ids @ ..] if t.eq_ignore_ascii_case(b"id") && !ids.is_empty() => {
                        let mut text = String::new();
                        for id in ids {
                            let Some(id) = integer_arg(id) else { return error(reply, "ERR Invalid client ID") };
                            if let Ok(id) = u64::try_from(id) {
                                self.client_line(&mut text, id, session, "client|list");
                            }
                        }
                        reply.bulk(text.as_bytes());
                        return After::Continue;
                    }
                    _ => return error(reply, SYNTAX),
                };
                let mut ids: Vec<u64> =
                    self.clients.by_id.keys().copied().filter(|&id| self.selected(&filter, id, session)).collect();
                ids.sort_unstable();
                let mut text = String::new();
                for id in ids {
                    self.client_line(&mut text, id, session, "client|list");
                }
                reply.bulk(text.as_bytes());
            }
            b"info" if args.len() == 1 => {
                let mut text = String::new();
                self.client_line(&mut text, session.id, session, "client|info");
                reply.bulk(text.as_bytes());
            }
            b"kill" if args.len() >= 2 => return self.client_kill(&args[1..], session, reply),
            b"help" if args.len() == 1 => {
                super::help_reply(reply, HELP);
            }
            _ => reply.error(&super::arity_error(&format!("client|{}", lossy(&sub)))),
        }
        After::Continue
    }

    /// `CLIENT KILL addr:port` (`+OK`, or an error when it names no one)
    /// or `CLIENT KILL [ID id] [TYPE type] [ADDR addr] [LADDR addr] [USER
    /// name] [SKIPME yes|no]` (how many); closes the caller too, after its
    /// reply, when it is among them.
    fn client_kill(&mut self, args: &[Cow<'_, [u8]>], session: &Session, reply: &mut Reply<RcBuf>) -> After {
        let old_form = args.len() == 1;
        let filter = if old_form {
            Filter { addr: Some(&args[0][..]), ..Filter::default() }
        } else {
            let mut f = Filter { skip_me: true, ..Filter::default() };
            for pair in args.chunks(2) {
                let [opt, value] = pair else { return error(reply, SYNTAX) };
                match opt.to_ascii_lowercase().as_slice() {
                    b"id" => match integer_arg(value) {
                        Some(id) if id > 0 => f.id = Some(id as u64),
                        _ => return error(reply, "ERR client-id should be greater than 0"),
                    },
                    b"type" => match client_type(value) {
                        // Masters and replicas: none here.
                        Ok(None) => f.id = Filter::NOBODY.id,
                        Ok(pubsub) => f.pubsub = pubsub,
                        Err(e) => return error(reply, &e),
                    },
                    b"addr" => f.addr = Some(value),
                    b"laddr" => f.laddr = Some(value),
                    b"user" if value[..] == *b"default" => {}
                    b"user" => return error(reply, &format!("ERR No such user '{}'", lossy(value))),
                    b"skipme" if value.eq_ignore_ascii_case(b"yes") => f.skip_me = true,
                    b"skipme" if value.eq_ignore_ascii_case(b"no") => f.skip_me = false,
                    _ => return error(reply, SYNTAX),
                }
            }
            f
        };
        let mut doomed: Vec<u64> =
            self.clients.by_id.keys().copied().filter(|&id| self.selected(&filter, id, session)).collect();
        doomed.sort_unstable();
        let close_me = doomed.contains(&session.id);
        let killed = doomed.len();
        for id in doomed.into_iter().filter(|&id| id != session.id) {
            // Nothing more is served to it: what it waited on, and its
            // subscriptions, go now.
            self.end_session(id);
            self.clients.killed.push(id);
        }
        match (old_form, killed) {
            (true, 0) => reply.error("ERR No such client"),
            (true, _) => reply.simple("OK"),
            (false, n) => reply.integer(n as i64),
        }
        if close_me {
            After::Close
        } else {
            After::Continue
        }
    }

    /// Connection `id`'s name (CLIENT SETNAME), as of its last command.
    pub(super) fn client_name(&self, id: u64) -> Option<Vec<u8>> {
        self.clients.by_id.get(&id).and_then(|c| c.name.clone())
    }

    /// Connection `id`'s address as Redis prints it (`?:0` when not known).
    pub(super) fn peer_text(&self, id: u64) -> String {
        address(self.clients.by_id.get(&id).and_then(|c| c.addrs.peer))
    }

    /// `RESET`: the connection as it was when it connected (no
    /// transaction, watches, subscriptions or name, database 0, and, when
    /// a password is required, not authenticated), as Redis 7.0's is.
    pub(super) fn reset(&mut self, session: &mut Session, reply: &mut Reply<RcBuf>) {
        session.multi = None;
        session.watch = None;
        session.name = None;
        session.db = 0;
        self.use_db(0);
        self.unsubscribe_all(session.id);
        self.stop_monitor(session.id);
        session.authenticated = self.requirepass.is_none();
        reply.simple("RESET");
    }

    /// Whether connection `id` is one `f` selects (`me` the caller).
    fn selected(&self, f: &Filter<'_>, id: u64, me: &Session) -> bool {
        let Some(c) = self.clients.by_id.get(&id) else { return false };
        let text = |a: Option<SocketAddr>| address(a).into_bytes();
        f.id.is_none_or(|want| want == id)
            && f.pubsub.is_none_or(|want| want == self.subscribed(id))
            && f.addr.is_none_or(|want| want == text(c.addrs.peer))
            && f.laddr.is_none_or(|want| want == text(c.addrs.local))
            && !(f.skip_me && id == me.id)
    }

    /// Appends Redis's line for connection `id` (`me`, the caller, as it
    /// is now: running CLIENT subcommand `current`).
    fn client_line(&self, text: &mut String, id: u64, me: &Session, current: &str) {
        let Some(c) = self.clients.by_id.get(&id) else { return };
        let now = Instant::now();
        let last_cmd = if c.sub.is_empty() { c.cmd.to_owned() } else { format!("{}|{}", c.cmd, c.sub) };
        let (name, db, multi, cmd, last) = if id == me.id {
            let multi = me.multi.as_ref().map(|t| (t.queued.len(), t.bytes));
            (me.name.as_deref(), me.db, multi, current, now)
        } else {
            (c.name.as_deref(), c.db, c.multi, last_cmd.as_str(), c.last)
        };
        let (subs, patterns) = self.subscription_counts(id);
        let mut flags = String::new();
        if self.is_monitor(id) {
            flags.push('O');
        }
        if subs + patterns > 0 {
            flags.push('P');
        }
        if multi.is_some() {
            flags.push('x');
        }
        if self.is_blocked(id) {
            flags.push('b');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let _ = writeln!(
            text,
            "id={id} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={db} sub={subs} psub={patterns} ssub=0 \
             multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem={} rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r \
             cmd={cmd} user=default redir=-1 resp=2",
            address(c.addrs.peer),
            address(c.addrs.local),
            c.addrs.fd.unwrap_or(-1),
            name.map(lossy).unwrap_or_default(),
            now.saturating_duration_since(c.created).as_secs(),
            now.saturating_duration_since(last).as_secs(),
            multi.map_or(-1, |(n, _)| n as i64),
            multi.map_or(0, |(_, bytes)| bytes),
        );
    }
}

fn error(reply: &mut Reply<RcBuf>, e: &str) -> After {
    reply.error(e);
    After::Continue
}

/// CLIENT HELP: the subcommands this server has, in Redis's words.
const HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "HELP",
    "    Prints this help.",
];
