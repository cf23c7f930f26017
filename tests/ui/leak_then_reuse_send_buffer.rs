// A forgotten send: the engine may still read the buffer, so writing it inside the
// scope cannot compile.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = vec![1u8; 1 << 20];
    runthrough::scope(|s| {
        let r = world.isend(s, &v, 0, 9)?;
        std::mem::forget(r);
        v[0] = 2;
        Ok(())
    })
}
