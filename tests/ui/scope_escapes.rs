// The scope itself cannot be kept for later use.
fn main() {
    let mut keep = None;
    runthrough::scope(|s| {
        keep = Some(s);
    });
    drop(keep);
}
