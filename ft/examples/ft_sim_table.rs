//! Prints the detector's scaling table (n = 8 … 65,536, one crash per run) as markdown,
//! for `bench/RESULTS.md`: `cargo run --release -p runthrough-ft --example ft_sim_table`.

use runthrough_ft::sim::scaling_table;

fn main() {
    let sizes: Vec<(u32, u32)> = (3..=16)
        .map(|k| {
            let n = 1u32 << k;
            let runs = if n <= 1024 {
                50
            } else if n <= 8192 {
                10
            } else {
                3
            };
            (n, runs)
        })
        .collect();
    println!("Ring detector, simulated: η = 10 ms, δ = 100 ms, message delays uniform in [5, 50] µs");
    println!("(plus one run per n with every delay 50 µs for the hop column); one random rank crashes");
    println!("at a random time in [20, 30) ms; times are from the crash.\n");
    print!("{}", scaling_table(&sizes, 1));
}
