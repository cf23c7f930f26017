//! Endpoint addresses are bytes other processes published
//! (`docs/UNTRUSTED.md`): `AddressVector::insert` hands the provider a zero-padded copy,
//! so a blob that is short, cut at any length, or whose sockaddr family announces a
//! longer address than it holds is never read past (run this test under valgrind to
//! see it: without the padding tcp reads 16 bytes of a 1-byte blob). Here: every such
//! blob gives a typed result, never a crash, and an overlong blob is refused before the
//! provider sees it.
//!
//! A provider not present here is skipped (`common::skip`: a failure unless
//! `RT_EXPECTED_SKIPS` names `provider-tcp` / `provider-sockets`).

mod common;

use common::open_node;
use runthrough_fabric::{EpAddr, Error, Provider};

#[test]
fn hostile_address_blobs_are_typed_results() {
    for p in [Provider::Tcp, Provider::Sockets] {
        let Some(a) = open_node(p) else { continue };
        let Some(b) = open_node(p) else { continue };
        let real = b.ep.name().unwrap();
        a.av.insert(&real).expect("a real address inserts");
        let mut blobs: Vec<Vec<u8>> = (1..real.0.len()).map(|k| real.0[..k].to_vec()).collect();
        // Family AF_INET6 (10) in a blob of sockaddr_in size, and garbage families.
        for fam in [10u16, 0xffff, 0, 27] {
            let mut v = real.0.clone();
            v[..2].copy_from_slice(&fam.to_le_bytes());
            blobs.push(v);
        }
        blobs.push(vec![0xff; 255]);
        for blob in &blobs {
            // Ok (the provider took garbage as an address) or a typed error: both fine.
            let _ = a.av.insert(&EpAddr(blob.clone()));
        }
        for len in [256, 4096] {
            assert!(
                matches!(a.av.insert(&EpAddr(vec![1; len])), Err(Error::InvalidArg(_))),
                "{len}-byte blob over {p}"
            );
        }
        assert!(a.av.insert(&EpAddr(Vec::new())).is_err());
    }
}
