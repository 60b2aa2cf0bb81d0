//! Snapshots, as Redis's RDB persistence has them: SAVE writes every
//! database to `dir`/`dbfilename` (CONFIG GET/SET, `cf kv-server --dir
//! --dbfilename`) through a temporary file renamed into place, as Redis
//! does; BGSAVE encodes in the foreground (values are shared buffers, so
//! this is a pass over the keys and a copy of their bytes: about a second
//! per GB) and writes the file from a thread while commands go on;
//! LASTSAVE and INFO's persistence section say when the last one
//! finished. A server started with a file there loads it
//! ([`RespDb::load_rdb`]), whether this server or redis-server 7.0 wrote
//! it, and redis-server loads the files this one writes. Save points
//! (`cf kv-server --save "3600 1 300 100"`, CONFIG SET save; none by
//! default, where Redis has `3600 1 300 100 60 10000`) start a BGSAVE as
//! Redis's do; SHUTDOWN saves first when they are set or SAVE is given.
//! There is no append-only file.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cornflakes::RcBuf;
use cornflakes_resp::Reply;

use super::rdb::{self, CollectionKind, Value, Writer};
use super::{Kind, RespDb};

/// Where snapshots go, and how the last ones went.
#[derive(Debug)]
pub(super) struct Persistence {
    pub(super) dir: PathBuf,
    pub(super) dbfilename: String,
    /// Unix time of the last successful save (the start, before one).
    last_save: u64,
    /// Changes (the stores' write counts summed) at the last save.
    writes_at_save: u64,
    /// A BGSAVE's writer thread, and the write count its snapshot had.
    bgsave: Option<(JoinHandle<Result<(), String>>, u64)>,
    last_bgsave_ok: bool,
    /// Redis's save points: a BGSAVE once this many changes have been
    /// made and this many seconds have passed since the last save.
    pub(super) save_points: Vec<(u64, u64)>,
    /// When a save point last started a BGSAVE (Unix seconds).
    last_try: u64,
    /// When [`RespDb::tick`] looks at the save points next.
    next_check: Instant,
    /// SHUTDOWN ran: the serving loop stops.
    pub(super) shutdown: bool,
}

/// Seconds after a failed BGSAVE before a save point tries again (Redis's
/// `CONFIG_BGSAVE_RETRY_DELAY`).
const RETRY_AFTER: u64 = 5;

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            dir: PathBuf::from("."),
            dbfilename: "dump.rdb".to_owned(),
            last_save: unix_secs(),
            writes_at_save: 0,
            bgsave: None,
            last_bgsave_ok: true,
            save_points: Vec::new(),
            last_try: 0,
            next_check: Instant::now(),
            shutdown: false,
        }
    }
}

fn unix_now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

fn unix_secs() -> u64 {
    unix_now().as_secs()
}

/// Save points as Redis's `save` setting writes them: `seconds changes`
/// pairs of integers (seconds at least 1), one space apart (`""`: none).
pub(super) fn parse_save_points(text: &str) -> Option<Vec<(u64, u64)>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    let numbers: Vec<u64> = text.split(' ').map(str::parse).collect::<Result<_, _>>().ok()?;
    // At least a second apart, as Redis checks.
    (numbers.len().is_multiple_of(2) && numbers.iter().step_by(2).all(|&s| s >= 1))
        .then(|| numbers.chunks(2).map(|p| (p[0], p[1])).collect())
}

/// Writes `bytes` to `path` as Redis's `rdbSave` does: a temporary file in
/// the same directory, flushed to disk, renamed over the old one.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = dir.join(format!("temp-{}-{}.rdb", std::process::id(), unix_now().as_nanos()));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("writing {}: {e}", path.display())
    })
}

impl RespDb {
    /// The file SAVE writes and the server loads at start.
    pub fn rdb_path(&self) -> PathBuf {
        self.persistence.dir.join(&self.persistence.dbfilename)
    }

    /// Sets where snapshots go (Redis's `dir` and `dbfilename`).
    pub fn set_rdb_path(&mut self, dir: &Path, dbfilename: &str) {
        self.persistence.dir = dir.to_owned();
        self.persistence.dbfilename = dbfilename.to_owned();
    }

    /// Loads the RDB file at `path` (written by this server or by
    /// redis-server up to 7.0) into the databases: how many keys (keys
    /// whose time is already up are left out, as Redis leaves them).
    ///
    /// # Errors
    ///
    /// A file that cannot be read or is not a valid RDB file, a type this
    /// server does not hold (streams, modules, functions), a key or value
    /// past its limits (values up to 1 MiB), or a key twice; the databases
    /// are then left empty.
    pub fn load_rdb(&mut self, path: &Path) -> Result<usize, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let entries = rdb::read(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let (now, now_ms) = (Instant::now(), unix_now().as_millis() as i64);
        let back = self.db;
        let mut loaded = 0;
        let mut result = Ok(());
        for e in entries {
            if e.expires_ms.is_some_and(|ms| ms <= now_ms) {
                continue;
            }
            self.use_db(e.db);
            if let Err(why) = self.load_entry(&e.key, &e.value) {
                result = Err(format!("{}: key {:?} of database {}: {why}", path.display(), super::lossy(&e.key), e.db));
                break;
            }
            if let Some(ms) = e.expires_ms {
                self.expires.insert(e.key[..].into(), now + Duration::from_millis((ms - now_ms) as u64));
            }
            loaded += 1;
        }
        self.use_db(back);
        if let Err(e) = result {
            self.for_each_db(|db| {
                db.store.clear();
                db.lists.clear();
                db.expires.clear();
            });
            return Err(e);
        }
        self.persistence.writes_at_save = self.total_writes();
        Ok(loaded)
    }

    /// Puts one key read from a file into the current database.
    fn load_entry(&mut self, key: &[u8], value: &Value) -> Result<(), String> {
        if self.kind_now(key).is_some() {
            return Err("it is in the file twice".into());
        }
        let status = |s| super::status_error(s).trim_start_matches("ERR ").to_owned();
        match value {
            Value::String(v) => self.set_string(key, v).map_err(status)?,
            Value::List(items) if items.is_empty() => {}
            Value::List(items) => {
                let items: Vec<&[u8]> = items.iter().map(|i| &i[..]).collect();
                self.store.check_put(key, &items).map_err(status)?;
                self.store.put(key, &items).map_err(status)?;
                self.lists.insert(key.into());
            }
            Value::Set(members) => {
                for m in members {
                    self.store.set_add(key, m).map_err(status)?;
                }
            }
            Value::Hash(pairs) => {
                for (f, v) in pairs {
                    self.store.hash_set(key, f, v).map_err(status)?;
                }
            }
            Value::ZSet(members) => {
                for (m, s) in members {
                    self.store.zset_insert(key, m, *s).map_err(status)?;
                }
            }
        }
        Ok(())
    }

    /// Every database as an RDB file, keys whose time is up left out.
    fn snapshot(&mut self) -> Vec<u8> {
        let ctime = unix_secs().to_string();
        let mut w =
            Writer::new(&[("redis-bits", "64"), ("ctime", &ctime), ("cornflakes-ver", env!("CARGO_PKG_VERSION"))]);
        let (now, now_ms) = (Instant::now(), unix_now().as_millis() as i64);
        let expires_ms = |at: Instant| now_ms + at.saturating_duration_since(now).as_millis() as i64;
        self.for_each_db(|db| {
            if db.store.is_empty() {
                return;
            }
            w.select_db(db.db, db.store.len(), db.expires.len());
            for key in db.store.keys() {
                let at = db.expires.get(key).copied();
                if at.is_some_and(|at| at <= now) {
                    continue;
                }
                let ttl = at.map(expires_ms);
                match db.kind_now(key) {
                    Some(Kind::String) => {
                        if let Some(v) = db.store.get(key).and_then(|v| v.first()) {
                            w.string_value(key, v, ttl);
                        }
                    }
                    Some(Kind::List) => {
                        let elems = db.store.get(key).unwrap_or_default();
                        w.collection(CollectionKind::List, key, elems.len(), elems.iter().map(RcBuf::as_slice), ttl);
                    }
                    Some(Kind::Hash) => {
                        let Some(h) = db.store.hash(key) else { continue };
                        let items = h.iter().flat_map(|(f, v)| [f, v.as_slice()]);
                        w.collection(CollectionKind::Hash, key, h.len(), items, ttl);
                    }
                    Some(Kind::Set) => {
                        let Some(s) = db.store.set(key) else { continue };
                        w.collection(CollectionKind::Set, key, s.len(), s.iter(), ttl);
                    }
                    Some(Kind::ZSet) => {
                        let Some(z) = db.store.zset(key) else { continue };
                        w.zset(key, z.len(), z.iter(), ttl);
                    }
                    None => {}
                }
            }
        });
        w.finish()
    }

    /// The stores' write counts, summed (what has changed since a save).
    fn total_writes(&mut self) -> u64 {
        let mut n = 0;
        self.for_each_db(|db| n += db.store.writes());
        n
    }

    /// Notes a BGSAVE that has finished.
    fn poll_bgsave(&mut self) {
        let Some((handle, _)) = &self.persistence.bgsave else { return };
        if !handle.is_finished() {
            return;
        }
        let (handle, writes) = self.persistence.bgsave.take().expect("checked");
        let ok = matches!(handle.join(), Ok(Ok(())));
        self.persistence.last_bgsave_ok = ok;
        if ok {
            self.persistence.last_save = unix_secs();
            self.persistence.writes_at_save = writes;
        }
    }

    /// SAVE, BGSAVE [SCHEDULE] and LASTSAVE.
    pub(super) fn persistence_command(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        self.poll_bgsave();
        let busy = self.persistence.bgsave.is_some();
        match name {
            "lastsave" => reply.integer(self.persistence.last_save as i64),
            "save" if busy => reply.error("ERR Background save already in progress"),
            "save" => match self.save_now() {
                Ok(()) => reply.simple("OK"),
                Err(e) => reply.error(&format!("ERR {e}")),
            },
            _ if !matches!(args, [] | [_]) || args.first().is_some_and(|a| !a.eq_ignore_ascii_case(b"schedule")) => {
                reply.error(super::SYNTAX)
            }
            // SCHEDULE would run it after the one in progress; this
            // server says so instead.
            _ if busy => reply.error("ERR Background save already in progress"),
            _ => match self.start_bgsave() {
                Ok(()) => reply.simple("Background saving started"),
                Err(e) => reply.error(&format!("ERR {e}")),
            },
        }
    }

    /// SAVE's work: the snapshot written now, in the foreground.
    fn save_now(&mut self) -> Result<(), String> {
        let (bytes, writes) = (self.snapshot(), self.total_writes());
        write_file(&self.rdb_path(), &bytes)?;
        self.persistence.last_save = unix_secs();
        self.persistence.writes_at_save = writes;
        Ok(())
    }

    /// Starts a BGSAVE (the snapshot encoded now, written by a thread).
    fn start_bgsave(&mut self) -> Result<(), String> {
        let (bytes, writes) = (self.snapshot(), self.total_writes());
        let path = self.rdb_path();
        let handle = std::thread::Builder::new()
            .name("cf-bgsave".into())
            .spawn(move || write_file(&path, &bytes))
            .map_err(|e| format!("cannot start the background save: {e}"))?;
        self.persistence.bgsave = Some((handle, writes));
        Ok(())
    }

    /// The save points' work, as Redis's `serverCron` does it (at most
    /// every 100 ms): notes a BGSAVE that has finished, and starts one when
    /// a save point is reached.
    pub(super) fn save_points_due(&mut self, now: Instant) {
        if self.persistence.save_points.is_empty() || now < self.persistence.next_check {
            return;
        }
        self.persistence.next_check = now + Duration::from_millis(100);
        self.poll_bgsave();
        if self.persistence.bgsave.is_some() {
            return;
        }
        let changes = self.total_writes().saturating_sub(self.persistence.writes_at_save);
        let (secs, p) = (unix_secs(), &self.persistence);
        let reached = p.save_points.iter().find(|&&(after, at_least)| {
            changes >= at_least
                && secs.saturating_sub(p.last_save) >= after
                && (p.last_bgsave_ok || secs.saturating_sub(p.last_try) >= RETRY_AFTER)
        });
        if let Some(&(after, _)) = reached {
            self.persistence.last_try = secs;
            eprintln!("kv-server: {changes} changes in {after} seconds; saving in the background");
            if let Err(e) = self.start_bgsave() {
                eprintln!("kv-server: {e}");
                self.persistence.last_bgsave_ok = false;
            }
        }
    }

    /// `CONFIG GET save`'s value: `seconds changes` pairs.
    pub(super) fn save_points_text(&self) -> String {
        let pairs: Vec<String> = self.persistence.save_points.iter().map(|(s, c)| format!("{s} {c}")).collect();
        pairs.join(" ")
    }

    /// Sets Redis's save points from `seconds changes [seconds changes
    /// ...]` (`""`: none).
    ///
    /// # Errors
    ///
    /// Redis's words, when the text is not pairs of non-negative integers.
    pub fn set_save_points(&mut self, text: &str) -> Result<(), &'static str> {
        self.persistence.save_points = parse_save_points(text).ok_or("Invalid save parameters")?;
        Ok(())
    }

    /// Whether SHUTDOWN has run (the serving loop stops).
    pub fn shutting_down(&self) -> bool {
        self.persistence.shutdown
    }

    /// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: saves first when
    /// asked or when save points are set (a failed save keeps the server
    /// running, unless FORCE), then stops the server; the client hears
    /// nothing, as from Redis.
    pub(super) fn shutdown(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) -> super::After {
        let (mut save, mut nosave, mut force, mut abort) = (false, false, false, false);
        for a in args {
            match a.to_ascii_lowercase().as_slice() {
                b"save" => save = true,
                b"nosave" => nosave = true,
                b"now" => {}
                b"force" => force = true,
                b"abort" => abort = true,
                _ => {
                    reply.error(super::SYNTAX);
                    return super::After::Continue;
                }
            }
        }
        if (abort && args.len() > 1) || (save && nosave) {
            reply.error(super::SYNTAX);
            return super::After::Continue;
        }
        if abort {
            reply.error("ERR No shutdown in progress.");
            return super::After::Continue;
        }
        if save || (!nosave && !self.persistence.save_points.is_empty()) {
            // A BGSAVE under way finishes first.
            if let Some((handle, _)) = self.persistence.bgsave.take() {
                let _ = handle.join();
            }
            if let Err(e) = self.save_now() {
                eprintln!("kv-server: SHUTDOWN could not save: {e}");
                if !force {
                    reply.error("ERR Errors trying to SHUTDOWN. Check logs.");
                    return super::After::Continue;
                }
            }
        }
        eprintln!("kv-server: SHUTDOWN: stopping");
        self.persistence.shutdown = true;
        super::After::Close
    }

    /// INFO's persistence section.
    pub(super) fn persistence_info(&mut self) -> String {
        self.poll_bgsave();
        let changes = self.total_writes().saturating_sub(self.persistence.writes_at_save);
        let p = &self.persistence;
        format!(
            "# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:{changes}\r\nrdb_bgsave_in_progress:{}\r\n\
             rdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\naof_enabled:0\r\n",
            u8::from(p.bgsave.is_some()),
            p.last_save,
            if p.last_bgsave_ok { "ok" } else { "err" },
        )
    }
}

#[cfg(test)]
mod tests {
    use cornflakes::Pool;

    use super::*;
    use crate::resp::resp_limits;
    use crate::Store;

    fn db() -> RespDb {
        RespDb::new(Store::new(Pool::new().unwrap(), resp_limits()), 512)
    }

    fn file_with(entries: &[(&[u8], &[u8])]) -> PathBuf {
        let mut w = Writer::new(&[]);
        w.select_db(0, entries.len(), 0);
        for (k, v) in entries {
            w.string_value(k, v, None);
        }
        let path = std::env::temp_dir().join(format!("cf-load-{}-{}.rdb", std::process::id(), unix_now().as_nanos()));
        std::fs::write(&path, w.finish()).unwrap();
        path
    }

    #[test]
    #[cfg_attr(miri, ignore)] // files
    fn a_file_this_server_cannot_hold_loads_nothing_and_says_why() {
        let big = vec![b'v'; 2 << 20];
        let path = file_with(&[(b"ok", b"1"), (b"big", &big)]);
        let mut d = db();
        let err = d.load_rdb(&path).unwrap_err();
        assert!(err.contains("\"big\"") && err.contains("database 0"), "{err}");
        assert!(d.store().is_empty(), "the keys before it were taken back");
        let path2 = file_with(&[(b"k", b"1"), (b"k", b"2")]);
        assert!(d.load_rdb(&path2).unwrap_err().contains("twice"));
        let missing = std::env::temp_dir().join("cf-no-such-file.rdb");
        assert!(d.load_rdb(&missing).unwrap_err().contains("cf-no-such-file.rdb"));
        let path3 = file_with(&[(b"a", b"1"), (b"b", b"2")]);
        assert_eq!(d.load_rdb(&path3), Ok(2));
        for p in [path, path2, path3] {
            let _ = std::fs::remove_file(p);
        }
    }
}
