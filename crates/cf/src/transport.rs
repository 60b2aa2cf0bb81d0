//! Opening the datapaths `cf` benchmarks run over, by name.

use std::net::SocketAddr;
use std::time::Duration;

use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
use cornflakes_datapath::ConnId;

/// Which transport a benchmark runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    /// The shared-memory datapath (processes on one host).
    Shm,
    /// The UDP datapath over io_uring, on 127.0.0.1.
    Udp,
    /// A bare shared-memory ring of the same design, without the datapath
    /// layers (the lower bound for `shm`).
    Bare,
}

impl Transport {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Udp => "udp",
            Transport::Bare => "bare",
        }
    }
}

/// A Unix socket path unique to this process.
pub(crate) fn shm_socket_path() -> String {
    format!(
        "/tmp/cf-{}-{}.sock",
        std::process::id(),
        std::time::SystemTime::now().elapsed().map(|d| d.as_nanos()).unwrap_or(0)
    )
}

pub(crate) fn shm_server(path: &str) -> Result<ShmDatapath, String> {
    ShmDatapath::listen(path, ShmConfig::default()).map_err(|e| format!("cannot listen on {path}: {e}"))
}

pub(crate) fn shm_client(path: &str) -> Result<(ShmDatapath, ConnId), String> {
    let dp = ShmDatapath::connect(path, ShmConfig::default()).map_err(|e| format!("cannot connect to {path}: {e}"))?;
    let conn = dp.connections().next().ok_or("connected datapath has no connection")?;
    Ok((dp, conn))
}

pub(crate) fn udp_server() -> Result<UdpDatapath, String> {
    UdpDatapath::bind("127.0.0.1:0".parse().expect("address"), UdpConfig::loopback())
        .map_err(|e| format!("cannot bind a UDP datapath on 127.0.0.1: {e}"))
}

pub(crate) fn udp_client(server: &str) -> Result<(UdpDatapath, ConnId), String> {
    let addr: SocketAddr = server.parse().map_err(|e| format!("bad server address {server:?}: {e}"))?;
    let mut dp = UdpDatapath::bind("127.0.0.1:0".parse().expect("address"), UdpConfig::loopback())
        .map_err(|e| format!("cannot bind a UDP datapath on 127.0.0.1: {e}"))?;
    let conn = dp.connect(addr);
    Ok((dp, conn))
}

/// How long a server waits in one `wait` call before checking again.
pub(crate) const SERVER_WAIT: Duration = Duration::from_millis(100);
