//! Example 17.7 of the run-through chapter, ported: broadcasts grouped in recovery blocks.
//! A block of `size` broadcasts runs, then everyone validates; if the failed group changed,
//! the block is redone — whatever each rank's broadcasts returned, the validate tells them
//! all the same thing.
//!
//! `rtrun -n 5 bcast_recovery [VICTIM]`: the victim SIGKILLs itself during block 4.
//! Each survivor prints `bcast_recovery: rank r done, failed [..], last value v`.
//! Only the root (rank 0) sets the value; every other rank clears its buffer first and
//! checks that a broadcast that succeeded delivered exactly the root's value (exit 3
//! otherwise), so a broadcast that moves nothing cannot pass.

use runthrough::{Error, ErrorMode, GroupOrder};

fn main() -> Result<(), Error> {
    let victim: Option<usize> = std::env::args().nth(1).and_then(|a| a.parse().ok());
    let rt = runthrough::init()?;
    let comm = rt.world();
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    let (rank, size) = (comm.rank(), comm.size());
    let mut failed = comm.validate()?;
    let mut buffer = [0i32];
    let mut offset = 0;
    let mut redone = 0;
    while offset < 10 {
        for i in 0..size {
            if Some(rank) == victim && offset == 4 && i == size / 2 {
                let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
                std::thread::sleep(std::time::Duration::from_secs(10));
            }
            let want = (offset + i) as i32;
            buffer[0] = if rank == 0 { want } else { -1 };
            if comm.bcast(&mut buffer, 0).is_err() {
                break;
            }
            if buffer[0] != want {
                eprintln!("bcast_recovery: rank {rank} got {} from broadcast {want}", buffer[0]);
                std::process::exit(3);
            }
        }
        let now = comm.validate()?;
        if now.compare(&failed) != GroupOrder::Ident {
            failed = now;
            redone += 1;
            continue; // redo this block
        }
        offset += 1;
    }
    println!(
        "bcast_recovery: rank {rank} done, failed {:?}, last value {}, blocks redone {redone}",
        failed.world_ranks(),
        buffer[0]
    );
    rt.finalize()
}
