// A request cannot leave its scope through a container that outlives it.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let v = [0u8; 4];
    let mut keep = Vec::new();
    runthrough::scope(|s| {
        keep.push(world.isend(s, &v, 0, 9).unwrap());
    });
    drop(keep);
    Ok(())
}
