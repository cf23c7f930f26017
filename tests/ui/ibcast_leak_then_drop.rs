// A forgotten nonblocking broadcast: its buffer cannot be freed inside the scope.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = vec![0u64; 1024];
    runthrough::scope(|s| {
        let r = world.ibcast(s, &mut v, 0)?;
        std::mem::forget(r);
        drop(v);
        Ok(())
    })
}
