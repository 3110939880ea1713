//! Benchmark: the files users hand rocgate, at sizes no site writes but a
//! generated file could reach. `cargo bench --bench config_files` prints the
//! median time to parse a compatibility matrix of 1,000 to 100,000 rows
//! (`Matrix::parse`, what `--matrix` and `matrix check` pay): linear in the
//! rows, so 100 times the rows takes about 100 times as long.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use rocgate_suites::compat_matrix::Matrix;
use std::time::Instant;

/// A matrix of `rows` releases, each as the built-in rows are written.
fn matrix(rows: usize) -> String {
    let mut text = String::from("schema_version = 1\n");
    for i in 0..rows {
        text.push_str(&format!(
            "[[release]]\nrocm = \"6.{i}.0\"\ngpus = [\"gfx942\", \"gfx90a\"]\namdgpu = [\"6.4.x\"]\nos = [\"ubuntu 24.04.3\"]\nsource = \"generated row {i}\"\n"
        ));
    }
    text
}

fn main() {
    println!("| matrix rows | parse time (median of 5) |");
    println!("|---|---|");
    for rows in [1_000, 10_000, 100_000] {
        let text = matrix(rows);
        let median = common::median(
            (0..5)
                .map(|_| {
                    let t = Instant::now();
                    let m = Matrix::parse(&text, "generated").expect("parses");
                    assert_eq!(m.rocm_rows.len(), rows);
                    t.elapsed()
                })
                .collect(),
        );
        println!("| {rows} | {:.1} ms |", median.as_secs_f64() * 1e3);
    }
}
