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
    use cornflakes_eval::{calibrate, compare, echo, kv, overload, pingpong, reproduce, serve, shapes, stall};
    match &cli.command {
        Command::Shapes(args) => shapes::run(&args.config())?,
        Command::Pingpong(args) => pingpong::run(&args.config())?,
        Command::Echo(args) => echo::run(&args.config())?,
        Command::Compare(args) => compare::run(&args.config()?)?,
        Command::KvServer(args) => kv::run_server(&args.options())?,
        Command::Loadgen(args) => kv::run_loadgen(&args.options()?)?,
        Command::Stall(args) => stall::run(&args.config())?,
        Command::Thresholds(args) => args.run()?,
        Command::Reproduce(args) => reproduce::run(&args.config())?,
        Command::Calibrate(args) => {
            calibrate::run(&args.config())?;
        }
        Command::Overload(args) => {
            overload::run(&args.config())?;
        }
        Command::Serve(args) => serve::run(args.role, args.transport, &args.addr, args.core)?,
        Command::IpcPingpong(args) => cornflakes_eval::ipc::run(&args.config())?,
        Command::IpcCompare(args) => {
            cornflakes_eval::ipc::compare(&args.config())?;
        }
        Command::IpcServe(args) => cornflakes_eval::ipc::serve(&args.service, args.max_size, args.core)?,
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}
