// A future awaiting a scoped request cannot leave the scope: it borrows the scope as the
// request does, so the scope still settles the request whatever becomes of the future.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = [0u8; 4];
    let fut = runthrough::scope(|s| {
        let r = world.irecv(s, &mut v, 0, 9);
        async move { r?.await }
    });
    drop(fut);
    Ok(())
}
