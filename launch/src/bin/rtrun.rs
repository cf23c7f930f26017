//! `rtrun`: run N ranks of a program with the runthrough bootstrap service.
//! All logic lives in `runthrough_launch::{cli, job}`; this file maps results to exit
//! codes and messages: after the job, one stderr line per rank that ended abnormally
//! (unless `--quiet`) and the `--outcome-file` records ([`runthrough_launch::report`]).
//! Set `RT_DEBUG=1` for launcher diagnostics on stderr.

use std::process::ExitCode;

use runthrough_launch::cli::{self, Invocation, USAGE};
use runthrough_launch::job::{self, JobEnd};

fn main() -> ExitCode {
    if std::env::var_os("RT_DEBUG").is_some_and(|v| !v.is_empty() && v != "0") {
        let _ = tracing::subscriber::set_global_default(stderr_log::StderrLog);
    }
    let opts = match cli::parse_args(std::env::args_os().skip(1)) {
        Ok(Invocation::Help) => {
            print!("{USAGE}");
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
                JobEnd::Interrupted => eprintln!("rtrun: interrupted, all ranks killed"),
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

/// A minimal `tracing` subscriber printing events to stderr (no extra dependency).
mod stderr_log {
    use std::fmt::{self, Write as _};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    pub(crate) struct StderrLog;

    struct Line(String);

    impl Visit for Line {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            if field.name() == "message" {
                let _ = write!(self.0, " {value:?}");
            } else {
                let _ = write!(self.0, " {}={value:?}", field.name());
            }
        }
    }

    impl Subscriber for StderrLog {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut line = Line(format!("rtrun: {}:", event.metadata().level()));
            event.record(&mut line);
            eprintln!("{}", line.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}
