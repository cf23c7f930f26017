// An owned-buffer request takes the vector: it cannot be used until handed back.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = vec![0u8; 1 << 16];
    let r = world.irecv_owned(v, 0, 9)?;
    v[0] = 1;
    std::mem::forget(r);
    Ok(())
}
