//! `cf shapes`: a quick side-by-side serialization comparison, in process.
//! For statistically careful numbers use the criterion bench
//! (`scripts/bench-shapes.sh`); this measures the same operations.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cornflakes_bench::{run_op, with_case, Case, Op, Shape, System, WithCase};
use serde::{Deserialize, Serialize};

use crate::report::rounded;
use crate::Error;

/// What `cf shapes` runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Time per system, shape and operation.
    pub time: Duration,
    /// Repeated batches per measurement; the median is reported.
    pub batches: usize,
    /// Core to pin to (the last core by default).
    pub core: Option<usize>,
    /// Only these shapes (empty: all).
    pub shapes: Vec<Shape>,
    /// Print one JSON object ([`ShapeReport`]) per measurement instead of the table.
    pub json: bool,
}

/// One measurement of `cf shapes --json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapeReport {
    /// The message shape.
    pub shape: String,
    /// The operation.
    pub op: String,
    /// The serializer.
    pub system: String,
    /// Median nanoseconds per operation (`null` if not finite).
    pub ns_per_op: Option<f64>,
}

/// Parses a duration such as `300ms`, `2s` or `50us`.
///
/// # Errors
///
/// A message saying what is expected.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len()));
    let n: f64 = num.parse().map_err(|_| format!("bad duration {s:?}: use e.g. 300ms or 2s"))?;
    match unit {
        "ms" => Ok(Duration::from_secs_f64(n / 1e3)),
        "s" | "" => Ok(Duration::from_secs_f64(n)),
        "us" => Ok(Duration::from_secs_f64(n / 1e6)),
        _ => Err(format!("bad duration unit in {s:?}: use us, ms or s")),
    }
}

/// Times one operation: calibrates a batch size, then reports the median
/// ns/op over `batches` batches.
struct Timer {
    op: Op,
    time: Duration,
    batches: usize,
}

impl WithCase for Timer {
    type Output = f64;
    fn run<C: Case>(self, case: &mut C) -> f64 {
        let per_batch = self.time / self.batches as u32;
        let mut iters = 1u64;
        loop {
            let start = Instant::now();
            for _ in 0..iters {
                black_box(run_op(case, self.op));
            }
            if start.elapsed() >= per_batch / 4 || iters >= 1 << 30 {
                break;
            }
            iters *= 2;
        }
        let iters = iters * 4;
        let mut samples: Vec<f64> = (0..self.batches)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(run_op(case, self.op));
                }
                start.elapsed().as_nanos() as f64 / iters as f64
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    }
}

/// Measures and prints the table (or JSON lines).
///
/// # Errors
///
/// None today; the signature leaves room.
pub fn run(args: &Config) -> Result<(), Error> {
    let core = args.core.unwrap_or(crate::pin::available_cores().saturating_sub(1));
    if let Err(e) = crate::pin::pin_to_core(core) {
        eprintln!("warning: {e}; running unpinned");
    }
    let shapes: Vec<Shape> = if args.shapes.is_empty() { Shape::ALL.to_vec() } else { args.shapes.clone() };
    let total = shapes.len() * Op::ALL.len() * System::ALL.len();
    let mut done = 0;
    let mut rows = Vec::new();
    for &shape in &shapes {
        for op in Op::ALL {
            let mut ns = Vec::new();
            for system in System::ALL {
                done += 1;
                eprint!("\r[{done:>2}/{total}] {:<10} {:<9} {:<12}", shape.name(), op.name(), system.name());
                let t = with_case(system, shape, Timer { op, time: args.time, batches: args.batches.max(1) });
                if args.json {
                    let report = ShapeReport {
                        shape: shape.name().to_owned(),
                        op: op.name().to_owned(),
                        system: system.name().to_owned(),
                        ns_per_op: rounded(t, 1),
                    };
                    println!("{}", serde_json::to_string(&report).expect("reports serialize"));
                }
                ns.push(t);
            }
            rows.push((shape, op, ns));
        }
    }
    eprintln!("\r{:<60}", "");
    if args.json {
        return Ok(());
    }
    println!("ns per operation (median of {} batches, pinned to core {core})", args.batches);
    print!("{:<10} {:<9}", "shape", "op");
    for s in System::ALL {
        print!(" {:>12}", s.name());
    }
    println!(" {:>16} {:>16}", "best other / cf", "prost / cf-pb");
    let at = |s: System| System::ALL.iter().position(|&x| x == s).expect("in ALL");
    let (cf, cf_pb, prost) = (at(System::Cornflakes), at(System::CornflakesProtobuf), at(System::Prost));
    for (shape, op, ns) in &rows {
        print!("{:<10} {:<9}", shape.name(), op.name());
        for t in ns {
            print!(" {t:>12.1}");
        }
        // Other libraries only: cornflakes-protobuf is ours too.
        let best_other = (0..ns.len()).filter(|&i| i != cf && i != cf_pb).map(|i| ns[i]).fold(f64::INFINITY, f64::min);
        println!(" {:>15.2}x {:>15.2}x", best_other / ns[cf], ns[prost] / ns[cf_pb]);
    }
    println!("\nTargets (serialize): >= 3x on shapes with fields >= 512 B (b, c); >= 0.91x on the others.");
    println!("prost / cf-pb: prost's encoding against the same proto3 bytes sent by serialize-and-send (cornflakes-protobuf).");
    Ok(())
}
