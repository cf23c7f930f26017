//! Prints the node-loss table (a whole host of 1, 16, 64 or 128 ranks dies at once; the
//! detector's ring in rank order against interleaved) for `bench/RESULTS.md`:
//! `cargo run --release -p runthrough-ft --example ft_node_loss_table`.

use std::time::Duration;

use runthrough_ft::node_loss::{node_loss_row, NodeLossRow};

fn main() {
    let delta = Duration::from_millis(100);
    println!("Ring detector, simulated: η = 10 ms, δ = 100 ms, message delays uniform in [5, 50] µs;");
    println!("ranks placed by slot on hosts of equal size; one random host's ranks crash together at a");
    println!("random time in [20, 30) ms; times are from the crash, worst of the runs.\n");
    println!("{}", NodeLossRow::markdown_header());
    for &(n, runs) in &[(4096u32, 3u32), (65536, 1)] {
        for per_host in [1u32, 16, 64, 128] {
            for interleaved in [false, true] {
                if per_host == 1 && interleaved {
                    continue; // the same ring
                }
                if n > 4096 && !interleaved && per_host > 16 {
                    continue; // minutes of heartbeats to show what 4096 ranks show
                }
                println!("{}", node_loss_row(n, per_host, interleaved, runs, 1).markdown(delta));
            }
        }
    }
}
