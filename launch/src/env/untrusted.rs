//! The `RT_*` variables are bytes another process (`rtrun`, or whatever started this
//! one) wrote (`docs/UNTRUSTED.md`): the `make fuzz` pass of
//! [`JobEnv::from_lookup`]. Nothing panics, every rejection is `MissingEnv` or `BadEnv`,
//! and what is accepted satisfies every invariant the rest of the start-up relies on.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use runthrough_fuzz::{Rng, Shape};

use super::*;

fn hex(rng: &mut Rng, n: usize) -> String {
    (0..n).map(|_| b"0123456789abcdef"[rng.below(16)] as char).collect()
}

/// `rtrun`'s variables for a random rank, values in [`ALL_VARS`] order separated by NUL
/// (which no environment value contains).
fn random_vars(rng: &mut Rng, out: &mut Vec<u8>) {
    let size = 1 + rng.below(64) as u32;
    let local_size = 1 + rng.below(size as usize) as u32;
    let jobid = hex(rng, JOBID_HEX_LEN);
    let env = JobEnv {
        rank: rng.below(size as usize) as u32,
        size,
        local_rank: rng.below(local_size as usize) as u32,
        local_size,
        kv_addr: SocketAddr::from(([127, 0, 0, 1], 1 + rng.below(65535) as u16)),
        secret: hex(rng, SECRET_HEX_LEN),
        bind: ["core", "none", "numa"][rng.below(3)].into(),
        shm_name: format!("/rt-{jobid}"),
        jobid,
        node: format!("rt-h{}", rng.below(8)),
    };
    for (i, (_, v)) in env.to_vars().into_iter().enumerate() {
        if i > 0 {
            out.push(0);
        }
        out.extend_from_slice(v.as_bytes());
    }
}

fn check(b: &[u8]) -> bool {
    let fields: Vec<&[u8]> = if b.is_empty() { Vec::new() } else { b.split(|&c| c == 0).collect() };
    let lookup = |name: &str| {
        let i = ALL_VARS.iter().position(|v| *v == name)?;
        fields.get(i).map(|f| OsStr::from_bytes(f).to_owned())
    };
    // Values are copied once; a non-UTF-8 one is echoed in its error lossily (an invalid
    // byte becomes U+FFFD, 3 bytes, in a string that grows by doubling).
    match runthrough_fuzz::metered(6 * b.len() + 64, || JobEnv::from_lookup(lookup)) {
        Ok(Some(e)) => {
            assert!(e.rank < e.size && e.local_rank < e.local_size && e.local_size <= e.size);
            assert!(is_hex(&e.jobid, JOBID_HEX_LEN) && is_hex(&e.secret, SECRET_HEX_LEN));
            assert!(crate::hosts::kv_ip_allowed(e.kv_addr.ip()) && e.kv_addr.port() != 0);
            assert!(e.shm_name.starts_with('/') && !e.shm_name[1..].contains('/') && e.shm_name.len() <= 255);
            true
        }
        Ok(None) => {
            assert!(fields.is_empty());
            false
        }
        Err(Error::MissingEnv { .. } | Error::BadEnv { .. }) => false,
        Err(e) => panic!("JobEnv::from_lookup gave {e:?}"),
    }
}

#[test]
fn fuzz_launch_job_env() {
    runthrough_fuzz::run("rank environment (launch/src/env.rs JobEnv::from_lookup)", random_vars, |b, shape| {
        let ok = check(b);
        if shape == Shape::Valid {
            assert!(ok, "rtrun's variables are rejected");
        }
        ok
    });
}
