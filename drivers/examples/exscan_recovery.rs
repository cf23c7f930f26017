//! Example 17.8 of the run-through chapter, ported: an exscan retried until a validate
//! finds no new failure, then each rank prints `Rank r) Received v` like the seed. With 5
//! ranks sending rank+1 and rank 2 failed, ranks 1, 3, 4 print 1, 3, 7; with ranks 0 and 2
//! failed, ranks 3 and 4 print 2 and 6 (rank 1, now first, has no defined result).
//!
//! `rtrun -n 5 exscan_recovery 2` (the listed ranks SIGKILL themselves after start-up).

use runthrough::{Error, ErrorMode, GroupOrder, Op};

fn main() -> Result<(), Error> {
    let victims: Vec<usize> =
        std::env::args().nth(1).unwrap_or_default().split(',').filter_map(|v| v.trim().parse().ok()).collect();
    let rt = runthrough::init()?;
    let comm = rt.world();
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    let rank = comm.rank();
    if victims.contains(&rank) {
        let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
    let send = [rank as i32 + 1];
    let mut recv = [0i32];
    // Get a starting set of failures.
    let mut failed = comm.validate()?;
    let defined = loop {
        let r = comm.exscan(&send, &mut recv, Op::Sum);
        if matches!(r, Err(Error::RankFailStop { .. })) {
            eprintln!("Rank {rank}) some rank failed during exscan");
        }
        // Uniform: every process gets the same failed group, so all leave together.
        let now = comm.validate()?;
        let same = now.compare(&failed) == GroupOrder::Ident;
        failed = now;
        if same {
            if let Ok(defined) = r {
                break defined;
            }
        }
    };
    if defined {
        println!("Rank {rank}) Received {}", recv[0]);
    }
    rt.finalize()
}
