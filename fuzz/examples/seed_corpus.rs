//! Writes valid serialized `Everything`, `Node` and `GetM` messages into
//! `corpus/decode/` (or the directory given as the first argument) as seeds
//! for the `decode` fuzz target, and runs the target's checks on each.
//!
//! ```text
//! cd fuzz && cargo run --example seed_corpus
//! ```
//!
//! Some seeds are built with every field zero-copy (threshold 0, values in a
//! pool), so their data follows the copied data in a different order.

use std::path::PathBuf;

use cornflakes::{Arena, Message, Pool};
use cornflakes_tests::example::{node::Leaf, Everything, GetM, Inner, Node};

fn getm(arena: &Arena, id: u32, keys: &[&'static str], vals: &[&'static [u8]]) -> Vec<u8> {
    let mut m = GetM::new_in(arena);
    m.set_id(id);
    for k in keys {
        m.append_keys(k);
    }
    for v in vals {
        m.append_vals(v);
    }
    m.serialize_to_vec().unwrap()
}

fn inner<'a>(arena: &'a Arena, a: u32, data: &'a [u8]) -> Inner<'a> {
    let mut m = Inner::new_in(arena);
    m.set_a(a);
    m.set_data(data);
    m
}

/// A tree of `depth` levels, with a leaf list on every node.
fn tree(arena: &Arena, depth: u32, value: u32) -> Node<'_> {
    let mut n = Node::new_in(arena);
    n.set_value(value);
    let mut leaf = Leaf::new_in(arena);
    leaf.set_type(["get", "put", "héllo", ""][value as usize % 4]);
    n.append_leaves(leaf);
    if depth > 1 {
        n.set_left(tree(arena, depth - 1, value * 2));
        if value.is_multiple_of(2) {
            n.set_right(tree(arena, depth - 1, value * 2 + 1));
        }
    }
    n
}

fn everything<'a>(arena: &'a Arena, seed: u32, text: &'a str, data: &'a [u8]) -> Everything<'a> {
    let mut m = Everything::new_in(arena);
    let s = seed as i64;
    if seed & 1 != 0 {
        m.set_i32(-(seed as i32));
        m.set_i64(s * -1_000_000_007);
        m.set_u32(seed.wrapping_mul(2_654_435_761));
        m.set_u64(u64::MAX - seed as u64);
    }
    m.set_flag(seed.is_multiple_of(3));
    if seed & 2 != 0 {
        m.set_f32(seed as f32 * 0.5);
        m.set_f64(-(seed as f64) / 3.0);
        m.set_text(text);
        m.set_data(data);
    }
    if seed & 4 != 0 {
        m.set_inner(inner(arena, seed, data));
    }
    for i in 0..(seed % 5) {
        let i64v = i as i64;
        m.append_r_i32(i as i32 - 2);
        m.append_r_i64(i64v << 40);
        m.append_r_u32(i);
        m.append_r_u64(u64::from(i) << 33);
        m.append_r_flag(i % 2 == 0);
        m.append_r_f32(i as f32 / 7.0);
        m.append_r_f64(i as f64 * 1e300);
        m.append_r_text(text);
        m.append_r_data(data);
        m.append_r_inner(inner(arena, i, data));
    }
    if seed & 8 != 0 {
        m.set_maybe(seed);
        m.set_far(u64::from(seed) << 32);
    }
    if seed & 16 != 0 {
        m.set_tree(tree(arena, 1 + seed % 4, seed));
    }
    m
}

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("corpus/decode"));
    std::fs::create_dir_all(&dir)?;
    let mut seeds: Vec<Vec<u8>> = Vec::new();

    // GetM, the paper's Listing 1.
    let arena = Arena::copying();
    seeds.push(getm(&arena, 0, &[], &[]));
    seeds.push(getm(&arena, 7, &["key"], &[b"value"]));
    seeds.push(getm(&arena, u32::MAX, &["a", "bb", "ccc", "ünï"], &[b"", b"x", &[0xff; 40]]));
    seeds.push(getm(&arena, 1, &[], &[&[0u8; 600]]));

    // Everything, copied.
    let big = "x".repeat(700);
    let big_bytes = vec![0xabu8; 1100];
    for seed in 0..32 {
        let (text, data): (&str, &[u8]) = match seed % 3 {
            0 => ("", b""),
            1 => ("hello", b"\x00\x01\x02"),
            _ => (&big, &big_bytes),
        };
        seeds.push(everything(&arena, seed, text, data).serialize_to_vec().unwrap());
    }

    // Everything with zero-copy fields (threshold 0, values in a pool).
    let pool = Pool::new().expect("pool");
    let zc = Arena::with_threshold(Some(&pool), 0);
    let text_buf = pool.alloc_copy(b"zero-copy text").expect("alloc");
    let data_buf = pool.alloc_copy(&[7u8; 600]).expect("alloc");
    let text = std::str::from_utf8(&text_buf).expect("utf8");
    for seed in [2, 6, 7, 14, 23, 31] {
        seeds.push(everything(&zc, seed, text, &data_buf).serialize_to_vec().unwrap());
    }

    // Node trees.
    for depth in 1..=6 {
        seeds.push(tree(&arena, depth, depth).serialize_to_vec().unwrap());
    }

    for (i, seed) in seeds.iter().enumerate() {
        cornflakes_fuzz::check(seed);
        std::fs::write(dir.join(format!("seed-{i:03}")), seed)?;
    }
    println!("wrote {} seeds to {}", seeds.len(), dir.display());
    Ok(())
}
