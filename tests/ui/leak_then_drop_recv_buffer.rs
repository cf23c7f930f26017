// The leak reproduction: forget a pending receive, then free its buffer. The buffer
// is borrowed for the whole scope, so freeing it inside the scope cannot compile.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = vec![0u8; 1 << 16];
    runthrough::scope(|s| {
        let r = world.irecv(s, &mut v, 0, 9)?;
        std::mem::forget(r);
        drop(v);
        let fresh = vec![0xAAu8; 1 << 16];
        assert!(fresh.iter().all(|&b| b == 0xAA));
        Ok(())
    })
}
