//! Snapshots, as Redis's RDB persistence has them: SAVE writes every
//! database to `dir`/`dbfilename` (CONFIG GET/SET, `cf kv-server --dir
//! --dbfilename`) through a temporary file renamed into place, as Redis
//! does; BGSAVE encodes in the foreground (values are shared buffers, so
//! this is a pass over the keys and a copy of their bytes: about a second
//! per GB) and writes the file from a thread while commands go on;
//! LASTSAVE and INFO's persistence section say when the last one
//! finished. A server started with a file there loads it
//! ([`RespDb::load_rdb`]), whether this server or redis-server 7.0 wrote
//! it, and redis-server loads the files this one writes. There are no save
//! points (`save ""`, as CONFIG GET says) and no append-only file.

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
}

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            dir: PathBuf::from("."),
            dbfilename: "dump.rdb".to_owned(),
            last_save: unix_secs(),
            writes_at_save: 0,
            bgsave: None,
            last_bgsave_ok: true,
        }
    }
}

fn unix_now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

fn unix_secs() -> u64 {
    unix_now().as_secs()
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
            "save" => {
                let (bytes, writes) = (self.snapshot(), self.total_writes());
                match write_file(&self.rdb_path(), &bytes) {
                    Ok(()) => {
                        self.persistence.last_save = unix_secs();
                        self.persistence.writes_at_save = writes;
                        reply.simple("OK")
                    }
                    Err(e) => reply.error(&format!("ERR {e}")),
                }
            }
            _ if !matches!(args, [] | [_]) || args.first().is_some_and(|a| !a.eq_ignore_ascii_case(b"schedule")) => {
                reply.error(super::SYNTAX)
            }
            // SCHEDULE would run it after the one in progress; this
            // server says so instead.
            _ if busy => reply.error("ERR Background save already in progress"),
            _ => {
                let (bytes, writes) = (self.snapshot(), self.total_writes());
                let path = self.rdb_path();
                let spawned =
                    std::thread::Builder::new().name("cf-bgsave".into()).spawn(move || write_file(&path, &bytes));
                match spawned {
                    Ok(handle) => {
                        self.persistence.bgsave = Some((handle, writes));
                        reply.simple("Background saving started")
                    }
                    Err(e) => reply.error(&format!("ERR cannot start the background save: {e}")),
                }
            }
        }
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
