//! Runs one benchmark case (system, shape, operation) N times, for
//! instruction counts under cachegrind (see `scripts/bench-cachegrind.sh`):
//! the difference between two iteration counts divided by the difference
//! in iterations is the cost of one operation, start-up excluded.
//!
//! ```text
//! shape_iters --system cornflakes --shape b-1x4096 --op serialize --iters 1000
//! ```

use std::hint::black_box;

use clap::Parser;
use cornflakes_bench::{with_case, Case, Op, Shape, System, WithCase};

/// Run one serialization benchmark case N times.
#[derive(Parser, Debug)]
#[command(about, long_about = None)]
struct Args {
    /// System under test.
    #[arg(long, value_enum)]
    system: System,
    /// Message shape.
    #[arg(long, value_enum)]
    shape: Shape,
    /// Operation to repeat.
    #[arg(long, value_enum)]
    op: Op,
    /// Number of operations.
    #[arg(long, default_value_t = 1000)]
    iters: u64,
    /// Also print the segments one serialize posts (lengths in bytes).
    #[arg(long)]
    describe: bool,
}

struct Loop {
    op: Op,
    iters: u64,
    describe: bool,
}

impl WithCase for Loop {
    type Output = (u64, Vec<usize>);

    fn run<C: Case>(self, case: &mut C) -> Self::Output {
        let mut acc = 0u64;
        match self.op {
            Op::Serialize => {
                for _ in 0..self.iters {
                    case.serialize();
                }
            }
            Op::Decode => {
                for _ in 0..self.iters {
                    acc = acc.wrapping_add(black_box(case.decode()));
                }
            }
        }
        let segments = if self.describe { case.wire().iter().map(Vec::len).collect() } else { Vec::new() };
        (acc, segments)
    }
}

fn main() {
    let args = Args::parse();
    let (acc, segments) =
        with_case(args.system, args.shape, Loop { op: args.op, iters: args.iters, describe: args.describe });
    println!("{} {} {} iters={} checksum={acc}", args.system.name(), args.shape.name(), args.op.name(), args.iters);
    if args.describe {
        println!("segments={segments:?}");
    }
}
