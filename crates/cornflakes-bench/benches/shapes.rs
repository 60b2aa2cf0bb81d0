//! Criterion benchmark: serialize and decode of six message shapes, for
//! Cornflakes, prost, FlatBuffers and Cap'n Proto. What each operation
//! does, per system, is documented in `cornflakes_bench` and its
//! `systems` modules; the same code runs under `shape_iters`.
//!
//! Groups are `<shape>-<op>` (e.g. `b-1x4096-serialize`), ids the system.
//! `scripts/bench-shapes.sh` runs this pinned to one core and tabulates the
//! medians.

use std::hint::black_box;
use std::time::Duration;

use cornflakes_bench::{with_case, Case, Op, Shape, System, WithCase};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};

struct Bench<'g, 'c> {
    group: &'g mut BenchmarkGroup<'c, WallTime>,
    system: System,
    op: Op,
}

impl WithCase for Bench<'_, '_> {
    type Output = ();

    fn run<C: Case>(self, case: &mut C) {
        match self.op {
            Op::Serialize => self.group.bench_function(self.system.name(), |b| b.iter(|| case.serialize())),
            Op::Decode => self.group.bench_function(self.system.name(), |b| b.iter(|| black_box(case.decode()))),
        };
    }
}

fn shapes(c: &mut Criterion) {
    for shape in Shape::ALL {
        for op in Op::ALL {
            let mut group = c.benchmark_group(format!("{}-{}", shape.name(), op.name()));
            for system in System::ALL {
                with_case(system, shape, Bench { group: &mut group, system, op });
            }
            group.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = shapes
}
criterion_main!(benches);
