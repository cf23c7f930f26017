//! `runthrough-gen-bindings [--check]`: regenerates the committed FFI bindings
//! (`fabric/src/ffi/bindings.rs`, `pmix/src/ffi/bindings.rs`) from the installed headers;
//! with `--check`, only says which are stale and exits 1 if any is. `make bindings` runs it.

use std::process::ExitCode;

use runthrough_gen_bindings::{first_difference, workspace_root, Binding, REGENERATE};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => false,
        ["--check"] => true,
        _ => {
            eprintln!("usage: runthrough-gen-bindings [--check]");
            return ExitCode::from(2);
        }
    };
    let root = workspace_root();
    let mut failed = false;
    for b in Binding::ALL {
        let path = root.join(b.path());
        let generated = match b.generate() {
            Ok(g) => g,
            Err(e) => {
                eprintln!("{}: {e}", b.path());
                failed = true;
                continue;
            }
        };
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        match first_difference(&committed, &generated) {
            None => println!("{}: up to date", b.path()),
            Some((line, _, _)) if check => {
                println!("{}: stale (first difference at line {line}); regenerate with {REGENERATE}", b.path());
                failed = true;
            }
            Some(_) => match std::fs::write(&path, &generated) {
                Ok(()) => println!("{}: written", b.path()),
                Err(e) => {
                    eprintln!("{}: cannot write: {e}", path.display());
                    failed = true;
                }
            },
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
