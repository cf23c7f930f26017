// ManuallyDrop is forgetting too: the receive buffer stays borrowed.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut out = vec![0i64; 8];
    runthrough::scope(|s| {
        let r = world.ireduce(s, &[1i64; 8], &mut out, runthrough::Op::Sum, 0)?;
        let _r = std::mem::ManuallyDrop::new(r);
        drop(out);
        Ok(())
    })
}
