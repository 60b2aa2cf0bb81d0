//! What filling and checking values costs, per byte: the load generator
//! checks every byte of every value it receives (`check_value`), and the
//! server preloads with `fill_value`.
//!
//! `cargo run --release -p cornflakes-workloads --example value_check_cost`

use std::hint::black_box;
use std::time::Instant;

use cornflakes_workloads::{check_value, fill_value};

fn main() {
    println!("{:>8} {:>12} {:>12} {:>14}", "bytes", "fill GB/s", "check GB/s", "check ns/value");
    for len in [64usize, 512, 1024, 4096, 8192, 65536] {
        let mut buf = vec![0u8; len];
        let rounds = (256 << 20) / len;
        let start = Instant::now();
        for i in 0..rounds {
            fill_value(i as u32, 1, black_box(&mut buf));
        }
        let fill = start.elapsed();
        fill_value(7, 1, &mut buf);
        let start = Instant::now();
        let mut ok = 0usize;
        for _ in 0..rounds {
            ok += usize::from(check_value(7, 1, len as u32, black_box(&buf)));
        }
        let check = start.elapsed();
        assert_eq!(ok, rounds, "every check passes");
        let bytes = (rounds * len) as f64;
        println!(
            "{len:>8} {:>12.1} {:>12.1} {:>14.1}",
            bytes / fill.as_secs_f64() / 1e9,
            bytes / check.as_secs_f64() / 1e9,
            check.as_nanos() as f64 / rounds as f64
        );
    }
}
