//! The entries ranks publish through the launcher's key-value service at start-up, as
//! another rank reads them: bytes of other processes
//! (`docs/UNTRUSTED.md`).
//!
//! Parts: [`pid`] (`pid/{rank}`), [`probe_addr`] (`probe/{rank}`), [`cma_ok`]
//! (`cma/{rank}`) and [`host`] (`host/{rank}`). Each checks the exact length and the
//! range of the value and names the rank in its [`Error::Init`]. Fabric endpoint
//! addresses (`fi/{rank}`) are checked where they are used
//! (`FabricTransport::connect`: the provider's address length; `AddressVector::insert`:
//! a zero-padded copy).

use crate::Error;

/// Longest host name accepted (Linux's `HOST_NAME_MAX` is 64; FQDNs up to 253).
pub(crate) const MAX_HOST_BYTES: usize = 255;

fn bad(what: &str, rank: u32, why: &str) -> Error {
    Error::Init(format!("bad {what} entry of rank {rank}: {why}"))
}

/// `pid/{rank}`: the rank's process id, 4 bytes little-endian, positive (a pid ≤ 0 means
/// a process group or every process to `kill(2)`, and is never a process to watch).
pub(crate) fn pid(rank: u32, v: &[u8]) -> Result<i32, Error> {
    let b: [u8; 4] = v.try_into().map_err(|_| bad("pid", rank, &format!("{} bytes, want 4", v.len())))?;
    match i32::from_le_bytes(b) {
        p if p > 0 => Ok(p),
        p => Err(bad("pid", rank, &format!("{p} is not a process id"))),
    }
}

/// `probe/{rank}`: the address of the rank's CMA probe word, 8 bytes little-endian (any
/// value: it is only ever read with `process_vm_readv`, which checks it).
pub(crate) fn probe_addr(rank: u32, v: &[u8]) -> Result<u64, Error> {
    let b: [u8; 8] = v.try_into().map_err(|_| bad("probe", rank, &format!("{} bytes, want 8", v.len())))?;
    Ok(u64::from_le_bytes(b))
}

/// `cma/{rank}`: whether the rank can read every local peer by CMA, one byte 0 or 1.
pub(crate) fn cma_ok(rank: u32, v: &[u8]) -> Result<bool, Error> {
    match v {
        [0] => Ok(false),
        [1] => Ok(true),
        _ => Err(bad("cma", rank, "want one byte, 0 or 1")),
    }
}

/// `host/{rank}`: the rank's node name, UTF-8, 1 to [`MAX_HOST_BYTES`] bytes.
pub(crate) fn host(rank: u32, v: &[u8]) -> Result<String, Error> {
    if v.is_empty() || v.len() > MAX_HOST_BYTES {
        return Err(bad("host", rank, &format!("{} bytes, want 1 to {MAX_HOST_BYTES}", v.len())));
    }
    std::str::from_utf8(v).map(str::to_owned).map_err(|_| bad("host", rank, "not UTF-8"))
}

#[cfg(test)]
mod untrusted {
    use runthrough_fuzz::{Rng, Shape};

    use super::*;

    #[global_allocator]
    static ALLOC: runthrough_fuzz::TrackingAlloc = runthrough_fuzz::TrackingAlloc;

    /// One entry of each kind as `boot` publishes it (kind byte first, then the value).
    fn random_entry(rng: &mut Rng, out: &mut Vec<u8>) {
        let kind = rng.below(4) as u8;
        out.push(kind);
        match kind {
            0 => out.extend_from_slice(&(1 + rng.below(1 << 22) as u32).to_le_bytes()),
            1 => out.extend_from_slice(&rng.next_u64().to_le_bytes()),
            2 => out.push(rng.below(2) as u8),
            _ => {
                let n = 1 + rng.below(20);
                out.extend((0..n).map(|_| b"abcdefghij-.0123"[rng.below(16)]));
            }
        }
    }

    /// Decodes `b[1..]` as the entry kind `b[0]` names; whatever decodes re-encodes.
    fn check(b: &[u8]) -> bool {
        let Some((&kind, v)) = b.split_first() else {
            return runthrough_fuzz::metered(0, || false);
        };
        // The value's own size, or the error message (under 128 bytes).
        let r = runthrough_fuzz::metered(v.len().max(128), || match kind % 4 {
            0 => pid(7, v).map(|p| p.to_le_bytes().to_vec()),
            1 => probe_addr(7, v).map(|a| a.to_le_bytes().to_vec()),
            2 => cma_ok(7, v).map(|c| vec![u8::from(c)]),
            _ => host(7, v).map(String::into_bytes),
        });
        match r {
            Ok(again) => {
                assert_eq!(again, v);
                true
            }
            Err(Error::Init(why)) => {
                assert!(why.contains("rank 7"), "{why}");
                false
            }
            Err(e) => panic!("entry decode gave {e:?}"),
        }
    }

    #[test]
    fn fuzz_boot_peer_entries() {
        runthrough_fuzz::run(
            "start-up peer entries (src/peer_entry.rs pid, probe, cma, host)",
            random_entry,
            |b, shape| {
                let ok = check(b);
                if shape == Shape::Valid {
                    assert!(ok, "a published entry is rejected");
                }
                ok
            },
        );
    }

    #[test]
    fn hostile_entries_are_init_errors_naming_the_rank() {
        assert_eq!(pid(3, &1234i32.to_le_bytes()).unwrap(), 1234);
        for v in [&[][..], &[1, 2, 3], &[1, 0, 0, 0, 0], &0i32.to_le_bytes(), &(-1i32).to_le_bytes()] {
            let e = pid(3, v).unwrap_err().to_string();
            assert!(e.contains("pid entry of rank 3"), "{e}");
        }
        assert!(probe_addr(2, &[0; 7]).is_err() && probe_addr(2, &[0; 9]).is_err());
        assert!(cma_ok(1, &[2]).is_err() && cma_ok(1, &[]).is_err() && cma_ok(1, &[1, 1]).is_err());
        assert!(host(0, b"").is_err() && host(0, &[0xff, 0xfe]).is_err());
        assert!(host(0, &[b'a'; MAX_HOST_BYTES + 1]).is_err());
        assert_eq!(host(0, b"rt-h0").unwrap(), "rt-h0");
    }

    proptest::proptest! {
        #[test]
        fn prop_arbitrary_entries(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            check(&b);
        }
    }
}
