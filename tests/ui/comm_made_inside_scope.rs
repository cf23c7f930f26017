// A request borrows its communicator for the scope: one made inside the closure dies
// too early (make it before the scope).
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let v = [0u8; 4];
    runthrough::scope(|s| {
        let dup = world.dup()?;
        let r = dup.isend(s, &v, 0, 9)?;
        r.wait()?;
        Ok(())
    })
}
