//! The split-retry loop of uniform creation (R23, R24): communicator creation is uniform —
//! it succeeds everywhere or fails everywhere — so a failed split is followed by a validate
//! (which recognises the failure) and a retry, and every survivor leaves the loop together.
//! Splitting by a single color then yields the live members (R25).
//!
//! `rtrun -n 5 split_retry [VICTIM] [create]`: the victim SIGKILLs itself just before the
//! split. With `create`, the loop creates a communicator from the group of members not
//! in the last validate's failed group instead (MPI_Comm_create, R22–R25: the group is
//! the same everywhere because the validate is uniform).
//! Each survivor prints `split_retry: rank r -> new rank k of m after t tries`.

use runthrough::{Error, ErrorMode, Op};

fn main() -> Result<(), Error> {
    let victim: Option<usize> = std::env::args().nth(1).and_then(|a| a.parse().ok());
    let create = std::env::args().nth(2).as_deref() == Some("create");
    let rt = runthrough::init()?;
    let comm = rt.world();
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    let rank = comm.rank();
    comm.barrier()?;
    if Some(rank) == victim {
        let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
    let mut tries = 0;
    let mut failed = comm.group_failed();
    let alive = loop {
        tries += 1;
        let made = if create {
            comm.create(&comm.group().difference(&failed)).map(|c| c.expect("every survivor is in the group"))
        } else {
            comm.split(Some(0), rank as i32).map(|c| c.expect("color 0 was given"))
        };
        match made {
            Ok(c) => break c,
            Err(Error::RankFailStop { .. }) => {
                failed = comm.validate()?;
            }
            Err(e) => return Err(e),
        }
    };
    // The new communicator works: sum of the survivors' old ranks.
    let mut sum = [0u64];
    alive.allreduce(&[rank as u64], &mut sum, Op::Sum)?;
    println!(
        "split_retry: rank {rank} -> new rank {} of {} after {tries} tries, sum of old ranks {}",
        alive.rank(),
        alive.size(),
        sum[0]
    );
    rt.finalize()
}
