//! Logging users can turn on: `RT_LOG=error|warn|info|debug|trace`, or any filter of
//! `tracing-subscriber`'s `EnvFilter` syntax (`RT_LOG=runthrough_engine=debug,info`),
//! printed on stderr by `rtrun` and by every rank (`init`, `MPI_Init`, the first
//! `MPI_Session_init`); each line says which process wrote it (`rtrun`, or `rank N` under
//! the launcher). `RT_DEBUG=1` is `RT_LOG=debug` for `rtrun` (the older switch). Nothing
//! is installed when neither is set, or when the program installed a subscriber of its own.

/// The variable naming the filter.
pub const RT_LOG: &str = "RT_LOG";

/// Installs a stderr subscriber with the `RT_LOG` filter (or `RT_DEBUG`'s `debug`) as
/// this process's global default, labelled `who`; once per process, and never over a
/// subscriber the program installed. A filter that does not parse is reported on stderr
/// and ignored.
pub fn from_env(who: &str) {
    let log = std::env::var(RT_LOG).ok();
    let debug = std::env::var("RT_DEBUG").ok();
    install(log.as_deref(), debug.as_deref(), who);
}

/// [`from_env`] with the values of `RT_LOG` (`log`) and `RT_DEBUG` (`debug`) given.
pub fn install(log: Option<&str>, debug: Option<&str>, who: &str) {
    let spec = match log {
        Some(s) if !s.trim().is_empty() => s,
        _ if debug.is_some_and(|v| !v.is_empty() && v != "0") => "debug",
        _ => return,
    };
    let filter = match tracing_subscriber::EnvFilter::try_new(spec.trim()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{who}: RT_LOG={spec:?} is not a log filter ({e}); no log");
            return;
        }
    };
    let who = who.to_owned();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(true)
        .without_time()
        .fmt_fields(tracing_subscriber::fmt::format::DefaultFields::new())
        .event_format(Labelled(who))
        .try_init();
}

/// The default format behind a `who:` label.
struct Labelled(String);

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Labelled
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let m = event.metadata();
        write!(writer, "{}: {} {}: ", self.0, m.level(), m.target())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
