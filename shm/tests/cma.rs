//! Single-copy reads with `process_vm_readv`: own process, a child process, and the typed
//! error cases.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use runthrough_shm::{cma, Error};

const CHILD_ENV: &str = "RT_SHM_CMA_CHILD";

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

#[test]
fn read_own_process() {
    let src = pattern(1 << 20);
    let mut dst = vec![0u8; src.len()];
    cma::read(std::process::id() as i32, src.as_ptr() as u64, &mut dst).unwrap();
    assert_eq!(src, dst);
    cma::read(std::process::id() as i32, src.as_ptr() as u64, &mut []).unwrap();
}

/// Child side of `read_child_process`: exposes a buffer, prints its address, waits for
/// stdin to close.
#[test]
fn cma_child_main() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let buf = pattern(3 << 20);
    println!("ADDR {} {}", buf.as_ptr() as u64, buf.len());
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(buf);
}

#[test]
fn read_child_process() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["cma_child_main", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (addr, len) = loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "child gave no address");
        // The harness may print "test cma_child_main ... " on the same line.
        if let Some((_, rest)) = line.split_once("ADDR ") {
            let mut it = rest.split_whitespace().map(|s| s.parse::<u64>().unwrap());
            break (it.next().unwrap(), it.next().unwrap() as usize);
        }
    };
    let pid = child.id() as i32;
    let mut dst = vec![0u8; len];
    cma::read(pid, addr, &mut dst).expect("CMA read from child");
    assert_eq!(dst, pattern(len));
    // A slice in the middle.
    let mut part = vec![0u8; 1000];
    cma::read(pid, addr + 12345, &mut part).unwrap();
    assert_eq!(part, pattern(len)[12345..13345]);
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    // Reaped child: gone.
    assert!(matches!(cma::read(pid, addr, &mut part), Err(Error::PeerGone { .. })));
}

#[test]
fn bad_address_and_missing_pid() {
    let me = std::process::id() as i32;
    let mut buf = [0u8; 64];
    assert!(matches!(cma::read(me, 8, &mut buf), Err(Error::BadAddress)));
    assert!(matches!(cma::read(me, u64::MAX - 8, &mut buf), Err(Error::BadAddress)));
    // Above any possible pid_max (2^22).
    let r = cma::read(0x3FFF_FFFF, 4096, &mut buf);
    assert!(matches!(r, Err(Error::PeerGone { pid: 0x3FFF_FFFF })), "{r:?}");
    assert!(cma::read(0, 4096, &mut buf).is_err());
    assert!(Error::PeerGone { pid: 1 }.is_peer_fault());
}

#[test]
fn env_switch() {
    std::env::set_var(cma::ENV_CMA, "0");
    assert!(cma::disabled_by_env());
    std::env::set_var(cma::ENV_CMA, "1");
    assert!(!cma::disabled_by_env());
    std::env::remove_var(cma::ENV_CMA);
    assert!(!cma::disabled_by_env());
}
