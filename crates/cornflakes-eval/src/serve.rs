//! The server half of `pingpong` and `echo`: `cf` re-executes itself as a
//! hidden `cf serve --role ...` on another core (see [`crate::child`]).

use crate::echo::{self, Mode};
use crate::transport::{self, Link};
use crate::{pin, pingpong, Error};

pub use crate::child::Role;

/// The echo mode a role serves; `None` for ping-pong.
fn echo_mode(role: Role) -> Option<Mode> {
    match role {
        Role::Pingpong | Role::PingpongInPlace => None,
        Role::EchoHybrid => Some(Mode::Hybrid),
        Role::EchoNoSas => Some(Mode::NoSas),
        Role::EchoRaw => Some(Mode::Raw),
    }
}

/// Serves `role` over `link` until the parent closes standard input;
/// prints `READY <addr>` once clients can connect.
///
/// `addr` is the Unix socket path for shm, `pid:fd:fd` of the parent's ring
/// memfds for the bare ring, and unused for udp (the kernel picks a port,
/// printed in the `READY` line).
///
/// # Errors
///
/// [`Error::Invalid`] for a role the link cannot serve (echo over the bare
/// ring); [`Error::Failed`] when the datapath fails.
pub fn run(role: Role, link: Link, addr: &str, core: Option<usize>) -> Result<(), Error> {
    crate::child::exit_with_parent();
    if let Some(core) = core {
        pin::pin_to_core(core)?;
    }
    let mode = echo_mode(role);
    if role == Role::PingpongInPlace {
        if link != Link::Shm {
            return Err(Error::Invalid("receiving in place is for --transport shm only".into()));
        }
        let mut dp = transport::shm_server_with(addr, true)?;
        println!("READY {addr}");
        return pingpong::serve_in_place(&mut dp);
    }
    match link {
        Link::Bare if mode.is_some() => Err(Error::Invalid("echo runs over a datapath: shm, udp or tcp".into())),
        Link::Bare => pingpong::serve_bare(addr),
        Link::StdTcp if mode.is_some() => Err(Error::Invalid("echo runs over a datapath: shm, udp or tcp".into())),
        Link::StdTcp => pingpong::serve_std_tcp(addr),
        Link::Shm => {
            let mut dp = transport::shm_server(addr)?;
            println!("READY {addr}");
            match mode {
                None => pingpong::serve(&mut dp),
                Some(m) => echo::serve(&mut dp, m),
            }
        }
        Link::Udp => {
            let mut dp = transport::udp_server()?;
            println!("READY {}", dp.local_addr());
            match mode {
                None => pingpong::serve(&mut dp),
                Some(m) => echo::serve(&mut dp, m),
            }
        }
        Link::Tcp => {
            // `addr` names the address to listen on; 127.0.0.1, port
            // chosen by the kernel, when it is not IP:port.
            let listen = transport::parse_tcp_addr(addr).unwrap_or_else(|_| ([127, 0, 0, 1], 0).into());
            let mut dp = transport::tcp_server(listen, cornflakes::PoolConfig::default())?;
            println!("READY {}", dp.local_addrs()[0]);
            match mode {
                None => pingpong::serve(&mut dp),
                Some(m) => echo::serve(&mut dp, m),
            }
        }
    }
}
