// A forgotten nonblocking allreduce: its result buffer cannot be reused inside the scope.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut out = vec![0i64; 8];
    runthrough::scope(|s| {
        let r = world.iallreduce(s, &[1i64; 8], &mut out, runthrough::Op::Sum)?;
        std::mem::forget(r);
        out[0] = 7;
        Ok(())
    })
}
