//! Prints the agreement's cost table (n = 2 … 2^20; failure-free, with the coordinator
//! crashing half-way through its proposals, and with an inner node crashing) as markdown, for
//! `bench/RESULTS.md`: `cargo run --release -p runthrough-ft --example ft_agree_table`.

use runthrough_ft::agree_sim::agree_table;

fn main() {
    let sizes: Vec<(u32, u32)> = [2u32, 4, 8, 16, 64, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576]
        .iter()
        .map(|&n| {
            (
                n,
                if n <= 1024 {
                    20
                } else if n <= 4096 {
                    5
                } else if n <= 65_536 {
                    2
                } else {
                    1
                },
            )
        })
        .collect();
    println!("Agreement (validate / agree), simulated: message delays uniform in [5, 50] µs, 100 ns");
    println!("per message sent (serialised per sender), entry within 20 µs, crash detection 1–2 ms.");
    println!("Rounds: longest causal message chain to a survivor's decision; latency: last survivor's");
    println!("decision from time zero. Tree of fan-out 32 (a star up to 33 participants). Root crash:");
    println!("participant 0 dies after sending half its first proposals; inner crash: participant 1");
    println!("(the root's first child) dies after its report and half its proposals.\n");
    print!("{}", agree_table(&sizes, 1));
}
