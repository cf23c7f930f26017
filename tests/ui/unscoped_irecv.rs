// There is no way to start a borrowing request without a scope.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = [0u8; 4];
    let r = world.irecv(&mut v, 0, 9)?;
    std::mem::forget(r);
    Ok(())
}
