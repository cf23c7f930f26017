//! `rtrun`: run N ranks of a program with the runthrough bootstrap service.
//! All logic lives in `runthrough_launch::{cli, job}`; this file maps results to exit
//! codes and messages: after the job, one stderr line per rank that ended abnormally
//! (unless `--quiet`) and the `--outcome-file` records ([`runthrough_launch::report`]).
//! Set `RT_LOG=debug` (or any `tracing` filter; `RT_DEBUG=1` too) for diagnostics on
//! stderr, from `rtrun` and from every rank (`runthrough_launch::logging`).

use std::process::ExitCode;

use runthrough_launch::cli::{self, Invocation};
use runthrough_launch::job::{self, JobEnd};

fn main() -> ExitCode {
    runthrough_launch::logging::from_env("rtrun");
    let opts = match cli::parse_args(std::env::args_os().skip(1)) {
        Ok(Invocation::Help) => {
            print!("{}", cli::help());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Man) => {
            print!("{}", cli::man_page());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Info { markdown }) => {
            let t =
                if markdown { runthrough_launch::tunables::markdown() } else { runthrough_launch::tunables::text() };
            print!("{t}");
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Version) => {
            println!("rtrun (runthrough) {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Run(opts)) => opts,
        Err(e) => {
            eprintln!("rtrun: {e}");
            eprintln!("Try 'rtrun --help' for more information.");
            return ExitCode::from(2);
        }
    };
    match job::run(&opts) {
        Ok(report) => {
            match report.end {
                JobEnd::TimedOut(t) => {
                    eprintln!("rtrun: job timed out after {}s", t.as_secs_f64());
                }
                JobEnd::Interrupted => {
                    eprintln!("rtrun: interrupted: every rank got SIGTERM, and SIGKILL if still running 500 ms later")
                }
                JobEnd::Completed => {}
            }
            if !opts.quiet {
                for r in report.reports.iter().filter(|r| r.is_abnormal()) {
                    eprintln!("{}", r.line());
                }
            }
            if let Some(path) = &opts.outcome_file {
                let text: String = report.reports.iter().map(|r| r.record() + "\n").collect();
                if let Err(e) = std::fs::write(path, text) {
                    eprintln!("rtrun: cannot write the outcome file {}: {e}", path.display());
                }
            }
            exit_code(report.exit_code)
        }
        Err(e) => {
            eprintln!("rtrun: {e}");
            exit_code(e.exit_code())
        }
    }
}

/// Process exit codes are 8 bits; keep the low byte like `exit(3)` does.
fn exit_code(code: i32) -> ExitCode {
    ExitCode::from((code & 0xff) as u8)
}
