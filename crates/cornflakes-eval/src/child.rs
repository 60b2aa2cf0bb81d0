//! The server half of a two-process benchmark: `cf` re-executes itself as
//! `cf serve ...` pinned to another core, waits for its `READY <addr>`
//! line, and kills it when done. The child exits by itself when its stdin
//! closes, so a killed client never leaves a spinning server behind.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cornflakes_kv::System;
use cornflakes_workloads::WorkloadSpec;

use crate::transport::Transport;
use crate::Error;

/// What a `cf serve` process does (its `--role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Role {
    /// Sends every message back, copied.
    Pingpong,
    /// Ping-pong over shm, receiving in place: a message left in the
    /// client's pool is copied once into our pool and sent back by
    /// descriptor.
    PingpongInPlace,
    /// `cf echo --mode hybrid`.
    EchoHybrid,
    /// `cf echo --mode no-sas`.
    EchoNoSas,
    /// `cf echo --mode raw`.
    EchoRaw,
}

impl Role {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Role::Pingpong => "pingpong",
            Role::PingpongInPlace => "pingpong-in-place",
            Role::EchoHybrid => "echo-hybrid",
            Role::EchoNoSas => "echo-no-sas",
            Role::EchoRaw => "echo-raw",
        }
    }
}

/// Where a `cf kv-server` runs: its datapath, address (a socket path on
/// shm), the command it is wrapped in (a network namespace, valgrind) and
/// its core.
pub(crate) struct ServerPlace<'a> {
    pub(crate) transport: Transport,
    pub(crate) addr: &'a str,
    pub(crate) prefix: &'a [String],
    pub(crate) server_core: usize,
}

/// A `cf kv-server` child (the server of `cf compare`, `calibrate`,
/// `phases`, `stall`, `tails`), controlled through its standard input. When
/// dropped it is killed and its shm socket file removed.
pub(crate) struct KvServer {
    child: ServerChild,
    socket: Option<String>,
}

impl KvServer {
    /// Starts `cf kv-server --system .. --workload .. --transport .. --addr
    /// .. --core .. --exit-with-parent` plus `extra`, wrapped in
    /// `place.prefix`, and waits for it to be ready.
    pub(crate) fn start(
        place: &ServerPlace<'_>,
        system: System,
        workload: &WorkloadSpec,
        extra: &[String],
    ) -> Result<Self, Error> {
        let mut args: Vec<String> = vec![
            "--system".into(),
            system.name().into(),
            "--workload".into(),
            workload.to_string(),
            "--transport".into(),
            place.transport.name().into(),
            "--addr".into(),
            place.addr.to_owned(),
            "--core".into(),
            place.server_core.to_string(),
            "--exit-with-parent".into(),
        ];
        args.extend_from_slice(extra);
        let child = ServerChild::spawn_wrapped(place.prefix, "kv-server", &args)?;
        let socket = (place.transport == Transport::Shm).then(|| place.addr.to_owned());
        Ok(KvServer { child, socket })
    }
}

impl std::ops::Deref for KvServer {
    type Target = ServerChild;
    fn deref(&self) -> &ServerChild {
        &self.child
    }
}

impl std::ops::DerefMut for KvServer {
    fn deref_mut(&mut self) -> &mut ServerChild {
        &mut self.child
    }
}

impl Drop for KvServer {
    fn drop(&mut self) {
        if let Some(path) = &self.socket {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A running server process.
pub struct ServerChild {
    child: Child,
    stdout: BufReader<ChildStdout>,
    /// What the server printed after `READY `: its address.
    pub addr: String,
}

impl ServerChild {
    /// Starts `cf serve <args>` and waits for it to be ready.
    pub fn spawn(args: &[String]) -> Result<Self, Error> {
        Self::spawn_subcommand("serve", args)
    }

    /// Starts `cf <subcommand> <args>` and waits for its `READY` line.
    pub fn spawn_subcommand(subcommand: &str, args: &[String]) -> Result<Self, Error> {
        Self::spawn_wrapped(&[], subcommand, args)
    }

    /// Starts `<prefix...> cf <subcommand> <args>` (e.g. `ip netns exec
    /// NAME`, which execs `cf` in its place) and waits for its `READY` line.
    pub fn spawn_wrapped(prefix: &[String], subcommand: &str, args: &[String]) -> Result<Self, Error> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the cf binary: {e}"))?;
        let mut command = match prefix {
            [] => Command::new(exe),
            [program, rest @ ..] => {
                let mut c = Command::new(program);
                c.args(rest).arg(exe);
                c
            }
        };
        let mut child = command
            .arg(subcommand)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the server process: {e}"))?;
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        if let Err(e) = stdout.read_line(&mut line) {
            let _ = child.kill();
            return Err(Error::Failed(format!("the server did not start: {e}")));
        }
        let Some(addr) = line.trim().strip_prefix("READY ") else {
            let _ = child.kill();
            return Err(Error::Failed(format!("the server did not start (said {line:?}; its error is above)")));
        };
        Ok(ServerChild { addr: addr.to_owned(), child, stdout })
    }

    /// The server's process id (for reading its memory use from
    /// `/proc/<pid>/status`).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Asks the server for a line of counters (a newline on its stdin; see
    /// [`control_from_parent`]) and returns its answer.
    pub fn report(&mut self) -> Result<String, Error> {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().ok_or("the server was stopped")?;
        stdin.write_all(b"\n").and_then(|()| stdin.flush()).map_err(|e| format!("the server is gone: {e}"))?;
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(line.trim_end().to_owned()),
            Ok(_) => Err(Error::Failed("the server is gone".into())),
            Err(e) => Err(Error::Failed(format!("cannot read the server's counters: {e}"))),
        }
    }

    /// Asks the server to stop (closes its stdin), waits for it, and
    /// returns the lines it printed after `READY` (a server that counts
    /// what it did prints its counters there).
    pub fn finish(&mut self) -> Vec<String> {
        drop(self.child.stdin.take());
        let lines = (&mut self.stdout).lines().map_while(Result::ok).collect();
        let _ = self.child.wait();
        lines
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In the server: exits the process when the parent closes our stdin.
pub fn exit_with_parent() {
    std::thread::spawn(|| {
        wait_for_stdin_eof();
        std::process::exit(0);
    });
}

/// In the server: raises `report` for every line the parent writes to our
/// stdin, and `stop` when it closes it, then calls `wake` (which ends the
/// serving loop's sleep, so it answers now rather than after its wait's
/// timeout); the loop answers or finishes and reports. Exits anyway if it
/// has not stopped within a few seconds.
pub fn control_from_parent(stop: &'static AtomicBool, report: &'static AtomicBool, wake: fn()) {
    std::thread::spawn(move || {
        let mut line = String::new();
        while matches!(std::io::stdin().read_line(&mut line), Ok(n) if n > 0) {
            report.store(true, Ordering::Relaxed);
            wake();
            line.clear();
        }
        stop.store(true, Ordering::Relaxed);
        wake();
        std::thread::sleep(Duration::from_secs(3));
        std::process::exit(0);
    });
}

fn wait_for_stdin_eof() {
    let mut buf = [0u8; 64];
    use std::io::Read;
    while let Ok(n) = std::io::stdin().read(&mut buf) {
        if n == 0 {
            break;
        }
    }
}
