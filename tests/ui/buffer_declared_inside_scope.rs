// A buffer that would die before the scope ends cannot be lent to a request of it.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    runthrough::scope(|s| {
        let mut v = vec![0u8; 64];
        let r = world.irecv(s, &mut v, 0, 9)?;
        std::mem::forget(r);
        Ok(())
    })
}
