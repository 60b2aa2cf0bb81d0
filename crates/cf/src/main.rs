//! `cf`: the Cornflakes command. Each subcommand is a benchmark or demo;
//! run `cf <subcommand> --help` for what it measures. This binary parses
//! the command line ([`args`]) and calls `cornflakes_eval`, which does the
//! work.
//!
//! Exit codes: 0 success, 1 a run failed, 2 the command line was wrong.
#![deny(unsafe_code)]

mod args;
mod error;

use clap::Parser;

use args::{Cli, Command};
use error::CliError;

fn run(cli: &Cli) -> Result<(), CliError> {
    use cornflakes_eval::{compare, echo, kv, overload, pingpong, reproduce, serve, shapes, stall};
    match &cli.command {
        Command::Shapes(args) => shapes::run(&args.config())?,
        Command::Pingpong(args) => pingpong::run(&args.config())?,
        Command::Echo(args) => echo::run(&args.config())?,
        Command::Compare(args) => compare::run(&args.config()?)?,
        Command::KvServer(args) if args.protocol == args::Protocol::Resp => {
            cornflakes_eval::resp_server::run(&args.resp_options()?)?
        }
        Command::KvServer(args) => kv::run_server(&args.options())?,
        Command::Loadgen(args) => kv::run_loadgen(&args.options()?)?,
        Command::Stall(args) => stall::run(&args.config())?,
        Command::Tails(args) => {
            cornflakes_eval::tails::run(&args.config())?;
        }
        Command::Offload(args) => cornflakes_eval::offload::run(&args.config())?,
        Command::Thresholds(args) => args.run()?,
        Command::Hiccup(args) => args.run()?,
        Command::Phases(args) => args.run()?,
        Command::Reproduce(args) => reproduce::run(&args.config())?,
        Command::Calibrate(args) => args.run()?,
        Command::Overload(args) => {
            overload::run(&args.config())?;
        }
        Command::RedisCompare(args) => cornflakes_eval::redis_compare::run(&args.config()?)?,
        Command::SocketsBench(args) => {
            cornflakes_eval::sockets_bench::run(&args.config())?;
        }
        Command::Serve(args) => serve::run(args.role, args.transport, &args.addr, args.core)?,
        Command::SocketMonitor(args) => {
            let opts = cornflakes_socket::MonitorOptions {
                addr: match &args.addr {
                    Some(a) => cornflakes_socket::MonitorAddr::parse(a),
                    None => cornflakes_socket::MonitorAddr::from_env(),
                },
                verbose: args.verbose,
                stop: None,
                on_ready: None,
            };
            cornflakes_socket::run_monitor(&opts).map_err(CliError::Monitor)?;
        }
        Command::Bulk(args) => {
            cornflakes_eval::bulk::run(&args.config())?;
        }
        Command::ZcProbe(args) => {
            cornflakes_eval::zcprobe::run(&args.config())?;
        }
        Command::ZcSink(args) => cornflakes_eval::zcprobe::sink(args.addr)?,
        Command::IpcPingpong(args) => cornflakes_eval::ipc::run(&args.config())?,
        Command::IpcCompare(args) => {
            cornflakes_eval::ipc::compare(&args.config())?;
        }
        Command::IpcServe(args) => cornflakes_eval::ipc::serve(&args.service, args.max_size, args.core)?,
    }
    Ok(())
}

/// On AMD CPUs, runs `cf` again with glibc's `rep movsb` switched off
/// ([`cornflakes_eval::glibc`]: ~3x slower copies at some distances, which
/// every serializer's copies hit); returns only when there is nothing to do
/// or the re-run could not start.
fn copy_without_slow_rep_movsb() {
    use std::os::unix::process::CommandExt;
    let Some(tunables) = cornflakes_eval::glibc::tunables_for_this_cpu() else {
        return;
    };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_default();
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let err = std::process::Command::new(exe)
        .arg0(arg0)
        .args(args)
        .env(cornflakes_eval::glibc::TUNABLES_VAR, tunables)
        .exec();
    eprintln!("cf: could not re-run with GLIBC_TUNABLES={tunables} ({err}); going on with glibc's copies as they are");
}

/// Whether a panic is `println!`'s on a closed standard output (`cf hiccup |
/// head`): the reader has what it wanted, which is no error of the run.
fn is_broken_pipe(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    text.starts_with("failed printing to stdout") && text.contains("Broken pipe")
}

/// The shell's status for a program stopped by a broken pipe (128 + SIGPIPE).
const BROKEN_PIPE_STATUS: u8 = 141;

fn main() -> std::process::ExitCode {
    copy_without_slow_rep_movsb();
    let cli = Cli::parse();
    // Rust ignores SIGPIPE, so a closed pipe makes `println!` panic. Stop
    // quietly instead, but by unwinding, so that the guards of a run (its
    // child processes, its pools) are dropped as on any other error.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_broken_pipe(info.payload()) {
            report(info);
        }
    }));
    match std::panic::catch_unwind(|| run(&cli)) {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
        Err(payload) if is_broken_pipe(payload.as_ref()) => std::process::ExitCode::from(BROKEN_PIPE_STATUS),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}
