//! The host's single-copy (CMA) cost against a plain copy, for sizes 16 KiB-1 MiB:
//! minimum over repetitions of `process_vm_readv` from this process and of a memcpy.
use std::time::Instant;

fn main() {
    let pid = std::process::id() as i32;
    for size in [16usize << 10, 64 << 10, 256 << 10, 1 << 20] {
        let src = vec![7u8; size];
        let mut dst = vec![0u8; size];
        let (mut cma, mut cp) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..50 {
            let t = Instant::now();
            runthrough_shm::cma::read(pid, src.as_ptr() as u64, &mut dst).expect("cma");
            cma = cma.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            dst.copy_from_slice(std::hint::black_box(&src));
            cp = cp.min(t.elapsed().as_secs_f64());
        }
        println!("{:>8} B: cma {:.2} us, copy {:.2} us, ratio {:.2}", size, cma * 1e6, cp * 1e6, cma / cp);
    }
}
