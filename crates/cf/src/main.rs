//! `cf`: the Cornflakes command. Each subcommand is a benchmark or demo;
//! run `cf <subcommand> --help` for what it measures.
#![deny(unsafe_code)]

mod child;
mod compare;
mod echo;
mod kv;
mod loadgen;
mod pin;
mod pingpong;
mod plot;
mod shapes;
mod transport;

use clap::{Parser, Subcommand};
use transport::Transport;

#[allow(missing_docs, dead_code, clippy::all)]
mod echo_proto {
    include!(concat!(env!("OUT_DIR"), "/echo.rs"));
}
use echo_proto::Echo;

/// Cornflakes benchmarks and demos.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serialization speed side by side with prost, FlatBuffers and Cap'n Proto.
    ///
    /// Cornflakes, prost, FlatBuffers and Cap'n Proto build-and-serialize
    /// and decode-and-read the paper's
    /// message shapes (1x64 B, 1x4096 B, 4x1024 B, 16x256 B, 8x32 B, nested).
    /// Prints ns per operation and the ratio of the fastest baseline to
    /// Cornflakes (above 1: Cornflakes is faster).
    Shapes(shapes::Args),
    /// Round-trip latency between two processes over shm, udp or a bare ring.
    ///
    /// Round-trip latency between two processes on different cores, over
    /// the shared-memory datapath, the UDP datapath (127.0.0.1) or a bare
    /// shared-memory ring. The last line of output is a JSON object.
    Pingpong(pingpong::Args),
    /// The paper's echo experiment (Figure 2), in three server modes.
    ///
    /// The paper's echo experiment (Figure 2): a message of two 2048 B
    /// fields echoed by a server that rebuilds it with serialize-and-send
    /// (hybrid), without it (no-sas), or echoes raw bytes (raw). Prints
    /// throughput and latency; the last line is a JSON object.
    Echo(echo::Args),
    /// The paper's comparisons: every serializer on the key-value store.
    ///
    /// For each workload (echo, ycsb, google, twitter, cdn), starts the
    /// key-value server with each system in turn on one core, sweeps the
    /// offered load with the open-loop load generator on the other core
    /// over the shared-memory datapath, prints the highest achieved load
    /// and p99 of each system and the paper's ratios, and writes
    /// OUT/summary.json and OUT/<workload>.png. With no arguments, runs a
    /// short default of all five workloads.
    Compare(compare::Args),
    /// The key-value server, for running by hand (see also `cf loadgen`).
    ///
    /// Preloads the workload's keys into pinned memory and serves get, put,
    /// get-many, get-list, get-from-list, append and put-many (and echo)
    /// requests in the chosen serializer until killed.
    KvServer(kv::ServerArgs),
    /// The open-loop load generator, against a running `cf kv-server`.
    ///
    /// Poisson arrivals at --rate (or a sweep that raises the load until
    /// the achieved load falls below 95 % of it), several client threads,
    /// every response checked, HDR-histogram latencies. The last line is a
    /// JSON object.
    Loadgen(kv::LoadgenArgs),
    /// The server half of `pingpong` and `echo` (started by them).
    #[command(hide = true)]
    Serve(ServeArgs),
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    #[arg(long, value_enum)]
    transport: Transport,
    /// pingpong, echo-hybrid, echo-no-sas or echo-raw.
    #[arg(long)]
    role: String,
    /// Unix socket path (shm) or pid:fd:fd (bare); unused for udp.
    #[arg(long, default_value = "")]
    addr: String,
    #[arg(long)]
    core: Option<usize>,
}

fn serve(args: &ServeArgs) -> Result<(), String> {
    child::exit_with_parent();
    if let Some(core) = args.core {
        pin::pin_to_core(core)?;
    }
    let mode = match args.role.as_str() {
        "pingpong" => None,
        "echo-hybrid" => Some(echo::Mode::Hybrid),
        "echo-no-sas" => Some(echo::Mode::NoSas),
        "echo-raw" => Some(echo::Mode::Raw),
        other => return Err(format!("unknown server role {other:?}")),
    };
    match args.transport {
        Transport::Bare => pingpong::serve_bare(&args.addr),
        Transport::Shm => {
            let mut dp = transport::shm_server(&args.addr)?;
            println!("READY {}", args.addr);
            match mode {
                None => pingpong::serve(&mut dp),
                Some(m) => echo::serve(&mut dp, m),
            }
        }
        Transport::Udp => {
            let mut dp = transport::udp_server()?;
            println!("READY {}", dp.local_addr());
            match mode {
                None => pingpong::serve(&mut dp),
                Some(m) => echo::serve(&mut dp, m),
            }
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Shapes(args) => shapes::run(args),
        Command::Pingpong(args) => pingpong::run(args),
        Command::Echo(args) => echo::run(args),
        Command::Compare(args) => compare::run(args),
        Command::KvServer(args) => kv::run_server(args),
        Command::Loadgen(args) => kv::run_loadgen(args),
        Command::Serve(args) => serve(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
