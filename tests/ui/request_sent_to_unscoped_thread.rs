// A request cannot move to a thread that may outlive the scope.
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = [0u8; 4];
    runthrough::scope(|s| {
        let r = world.irecv(s, &mut v, 0, 9)?;
        std::thread::spawn(move || r.wait());
        Ok(())
    })
}
