// A receive buffer stays borrowed until the scope ends, even after the request
// completed (so a leaked request can never race with the reader).
fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let mut v = [0u8; 4];
    runthrough::scope(|s| {
        let r = world.irecv(s, &mut v, 0, 9)?;
        r.wait()?;
        println!("{}", v[0]);
        Ok(())
    })
}
