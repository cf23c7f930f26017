// A request cannot leave its scope by being returned.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = [0u8; 4];
    let r = runthrough::scope(|s| world.irecv(s, &mut v, 0, 9));
    drop(r);
    Ok(())
}
