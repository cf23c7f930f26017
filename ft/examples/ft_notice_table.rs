//! Prints the cost of a revoke notice over the overlay (n = 16 … 2^20; failure-free, and
//! with 1 and log2 n forwarders crashing) as markdown, for `bench/RESULTS.md`:
//! `cargo run --release -p runthrough-ft --example ft_notice_table`.

use runthrough_ft::notice::notice_table;

fn main() {
    let sizes: Vec<u32> = (4..=20).step_by(2).map(|e| 1u32 << e).collect();
    println!("Revoke notice over the overlay, simulated: message delays uniform in [5, 50] µs, 100 ns per");
    println!("message sent (serialised per sender), crash detection 1–2 ms. Member 0 revokes; crashes: the");
    println!("origin's first fingers (1, 2, 4, …) each die after passing the notice to one finger.\n");
    print!("{}", notice_table(&sizes, 1));
}
