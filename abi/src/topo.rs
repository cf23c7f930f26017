//! Process topologies: the helper `MPI_Dims_create` (the topology constructors and
//! neighbourhood collectives are not implemented yet: they answer
//! `MPI_ERR_UNSUPPORTED_OPERATION`, docs/ABI.md).

use std::ffi::c_int;

use crate::consts::*;
use crate::raise::raise_on;

pub(crate) unsafe fn MPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    if nnodes < 0 || ndims < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    let n = ndims as usize;
    // SAFETY: the program's array of ndims entries.
    let d = unsafe { std::slice::from_raw_parts_mut(dims, n) };
    let fixed: i64 = d.iter().filter(|&&x| x > 0).map(|&x| x as i64).product();
    if d.iter().any(|&x| x < 0) || (fixed > 0 && nnodes as i64 % fixed != 0) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_DIMS);
    }
    let free: Vec<usize> = (0..n).filter(|&i| d[i] == 0).collect();
    if free.is_empty() {
        return if fixed == nnodes as i64 { MPI_SUCCESS } else { raise_on(MPI_COMM_WORLD, MPI_ERR_DIMS) };
    }
    // As close to each other as possible (MPI-4.1 8.5.2): the factorisation whose
    // dimensions, in non-increasing order, are lexicographically smallest (72 in two
    // dimensions is 9 x 8, not 12 x 6).
    let rest = (nnodes as i64 / fixed.max(1)) as u64;
    let Some(vals) = balanced_factors(rest, free.len(), rest) else {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_DIMS);
    };
    for (k, &i) in free.iter().enumerate() {
        d[i] = vals[k] as c_int;
    }
    MPI_SUCCESS
}

/// `n` as `k` factors of at most `cap` each, non-increasing, the lexicographically
/// smallest such list (so the largest factor is as small as it can be, then the next...);
/// `None` when there is none. `n == 0` (a zero-sized grid) gives zeros.
fn balanced_factors(n: u64, k: usize, cap: u64) -> Option<Vec<u64>> {
    if n == 0 {
        return Some(vec![0; k]);
    }
    // Every factor divides n: its divisors, ascending (trial division to sqrt(n)).
    let mut divisors: Vec<u64> = (1..).take_while(|d| d * d <= n).filter(|d| n.is_multiple_of(*d)).collect();
    let high: Vec<u64> = divisors.iter().rev().map(|d| n / d).filter(|&q| q * q != n).collect();
    divisors.extend(high);
    let mut out = Vec::with_capacity(k);
    split_factors(n, k, cap, &divisors, &mut out).then_some(out)
}

/// The recursion of [`balanced_factors`] over `divisors` (those of the original `n`,
/// ascending): pushes the factors of `n` to `out` and returns whether it could.
fn split_factors(n: u64, k: usize, cap: u64, divisors: &[u64], out: &mut Vec<u64>) -> bool {
    if k == 0 {
        return n == 1;
    }
    if k == 1 {
        if n > cap {
            return false;
        }
        out.push(n);
        return true;
    }
    // The largest factor d: d^k >= n, d divides n, d <= cap; smallest first.
    for &d in divisors.iter().filter(|&&d| d <= cap.min(n) && n.is_multiple_of(d)) {
        if (d as u128).pow(k as u32) < n as u128 {
            continue;
        }
        out.push(d);
        if split_factors(n / d, k - 1, d, divisors, out) {
            return true;
        }
        out.pop();
    }
    false
}

/// No topology is attached to communicators yet: every communicator is `MPI_UNDEFINED`.
pub(crate) unsafe fn MPI_Topo_test(comm: crate::types::Handle, status: *mut c_int) -> c_int {
    let _c = crate::comm::comm!(comm);
    // SAFETY: output argument.
    unsafe { *status = MPI_UNDEFINED };
    MPI_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::balanced_factors;

    #[test]
    fn dims_are_as_close_to_each_other_as_possible() {
        assert_eq!(balanced_factors(72, 2, 72), Some(vec![9, 8]));
        assert_eq!(balanced_factors(12, 3, 12), Some(vec![3, 2, 2]));
        assert_eq!(balanced_factors(7, 2, 7), Some(vec![7, 1]));
        assert_eq!(balanced_factors(36, 3, 36), Some(vec![4, 3, 3]));
        assert_eq!(balanced_factors(1, 4, 1), Some(vec![1, 1, 1, 1]));
        assert_eq!(balanced_factors(64, 3, 64), Some(vec![4, 4, 4]));
        assert_eq!(balanced_factors(2_147_483_647, 2, 2_147_483_647), Some(vec![2_147_483_647, 1]));
        assert_eq!(balanced_factors(1 << 30, 2, 1 << 30), Some(vec![1 << 15, 1 << 15]));
    }
}
