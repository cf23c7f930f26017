//! `rtrun`'s man page, rtrun.1, and the sections of `--help` after the options, both
//! from one source.
//!
//! Parts:
//! - [`SECTIONS`]: what is not an option's description (durations, signals, environment,
//!   exit status, examples, files), as data.
//! - [`help_text`]: those sections as plain text, clap's long after-help.
//! - [`man_page`]: the page in roff. `clap_mangen` renders the title, the description
//!   and the options from the clap definition (`super::args`); NAME and SYNOPSIS are
//!   written here (`rtrun, mpiexec`, and the usage line rather than every option), and
//!   [`SECTIONS`] follow.

use clap_mangen::roff::{bold, line_break, roman, Roff};

use super::args::{ABOUT, USAGE};

/// One piece of a section.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part {
    /// A paragraph.
    Para(&'static str),
    /// A term and what it means.
    Item(&'static str, &'static str),
    /// A command line, as it is typed.
    Code(&'static str),
}

/// A section after the options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Section {
    /// Its title, as `--help` prints it (the man page's in capitals).
    pub(crate) title: &'static str,
    /// Only in the man page (about the installed tree), not in `--help`.
    pub(crate) man_only: bool,
    /// Its paragraphs, items and commands, in order. Text is wrapped by hand for
    /// `--help` (the man page fills it again).
    pub(crate) parts: &'static [Part],
}

use Part::{Code, Item, Para};

/// The sections after the options, in order.
pub(crate) const SECTIONS: &[Section] = &[
    Section {
        title: "Durations",
        man_only: false,
        parts: &[Para("A number with an optional unit us, ms, s or m (default s): 250ms, 1.5s, 2.")],
    },
    Section {
        title: "Signals",
        man_only: false,
        parts: &[Para(
            "SIGINT or SIGTERM to rtrun gives every rank SIGTERM, then SIGKILL to those still
running 500 ms later; exit 130. An abort (MPI_Abort, a fatal error) does the same to
the ranks it names.",
        )],
    },
    Section {
        title: "Environment",
        man_only: false,
        parts: &[
            Para("Read by rtrun (rtrun --info lists every variable runthrough reads):"),
            Item(
                "RT_LOG",
                "error, warn, info, debug, trace or a tracing filter (e.g.
runthrough_engine=debug): rtrun's and every rank's log on standard
error, each line labelled rtrun or rank N",
            ),
            Item("RT_DEBUG", "set (not empty, not 0): rtrun's diagnostics on standard error"),
            Item(
                "RT_FT_TIMEOUT_MS",
                "the failure detector's timeout in milliseconds when --ft-timeout is
not given (also the start-up timeout)",
            ),
            Item(
                "RT_FABRIC_IFACE",
                "with --host names given without =IP: the interface whose first IPv4
address a rank's libfabric endpoint binds to",
            ),
            Item(
                "RT_*, FI_*",
                "passed on to every rank (through a launch agent, those whose values
are shell-safe are put on the agent's command line); FI_* variables
configure libfabric",
            ),
            Para(
                "Set by rtrun for every rank: RT_RANK, RT_SIZE, RT_LOCAL_RANK, RT_LOCAL_SIZE,
RT_NODE, RT_JOBID, RT_KV_ADDR, RT_KV_SECRET (stdin behind a launch agent: the secret
is the first line of the rank's standard input, never on a command line),
RT_SHM_NAME, RT_BIND, and where chosen RT_TRANSPORT, RT_PROVIDER,
RT_INITIAL_ERRHANDLER, RT_FABRIC_ADDR.",
            ),
            Para(
                "A program built with mpicc or mpicxx finds libmpi_abi.so.1 in the installation's
lib directory (a run path); LD_LIBRARY_PATH chooses another MPI-5 standard ABI
library.",
            ),
        ],
    },
    Section {
        title: "Exit status",
        man_only: false,
        parts: &[
            Para(
                "With no rank failed, rank 0's exit code. Otherwise (--exit-status r7, the default)
the code of the lowest rank that exited after finalizing; if none did, the last abort
code; where that code is 0 but a rank that finalized exited non-zero, the lowest such
rank's code (as mpirun). With --exit-status first-nonzero: the code of the first rank
to end non-zero, 128+signal for a signal.",
            ),
            Item("2", "bad arguments"),
            Item("124", "--timeout expired: every rank was killed"),
            Item("126", "the program is not executable"),
            Item("127", "the program was not found"),
            Item("130", "interrupted (SIGINT or SIGTERM): every rank was killed"),
            Item("1", "any other failure to launch"),
            Para(
                "After the job, one line on standard error for every rank that ended abnormally
(killed by a signal, a non-zero exit code, aborted, or exited without finalizing),
unless --quiet.",
            ),
        ],
    },
    Section {
        title: "Examples",
        man_only: false,
        parts: &[
            Para("Four ranks on this host (mpirun's spelling):"),
            Code("mpiexec -np 4 ./hello"),
            Para("Eight ranks on the hosts of an Open MPI hostfile, started through ssh:"),
            Code("rtrun -n 8 --hostfile hosts --launch-agent 'ssh {host}' --kv-addr 10.0.0.1 ./app"),
            Para("Rank 1 killed 2 s after start; one record per rank in outcome.txt:"),
            Code("rtrun -n 4 --kill 1@2s --outcome-file outcome.txt ./app"),
        ],
    },
    Section {
        title: "Files",
        man_only: true,
        parts: &[
            Item("PREFIX/lib/libmpi_abi.so.1", "runthrough's MPI-5 standard ABI library."),
            Item(
                "PREFIX/include/mpi.h",
                "The standard ABI header (mpi_abi.h) and runthrough's extensions (mpi-ext.h).",
            ),
        ],
    },
    Section {
        title: "See also",
        man_only: true,
        parts: &[Para(
            "mpicc -showme:help, pkg-config(1) (modules mpi-abi and mpi); README.md and
docs/ABI.md of the runthrough sources.",
        )],
    },
];

/// The sections `--help` prints after the options, as text.
pub(crate) fn help_text() -> String {
    let mut s = String::new();
    for (n, section) in SECTIONS.iter().filter(|s| !s.man_only).enumerate() {
        if n > 0 {
            s.push('\n');
        }
        s += &format!("{}:\n", section.title);
        let width = section
            .parts
            .iter()
            .filter_map(|p| if let Item(term, _) = p { Some(term.len()) } else { None })
            .max()
            .unwrap_or(0);
        for (i, part) in section.parts.iter().enumerate() {
            // A blank line between paragraphs, and around a list of items; none between
            // an example's sentence and its command.
            let previous = i.checked_sub(1).map(|i| &section.parts[i]);
            if matches!((previous, part), (Some(Para(_) | Code(_)), Para(_) | Item(..)) | (Some(Item(..)), Para(_))) {
                s.push('\n');
            }
            match part {
                Para(text) => {
                    for line in text.lines() {
                        s += &format!("  {line}\n");
                    }
                }
                Code(text) => s += &format!("    {text}\n"),
                Item(term, text) => {
                    for (i, line) in text.lines().enumerate() {
                        let head = if i == 0 { *term } else { "" };
                        s += &format!("  {head:width$}  {line}\n");
                    }
                }
            }
        }
    }
    s
}

/// What `roff` puts before every page it renders (`\*(Aq` for an apostrophe), once
/// at the top of ours.
const APOSTROPHES: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

/// rtrun.1: the whole man page, in roff (see the module doc).
pub(crate) fn man_page() -> String {
    let cmd = super::args::command();
    let version = cmd.get_version().unwrap_or_default().to_owned();
    let man = clap_mangen::Man::new(cmd);
    // Each part is rendered on its own (with the apostrophe preamble, kept once).
    let mut parts: Vec<Vec<u8>> = vec![Vec::new(); 4];

    let mut roff = Roff::new();
    roff.control("SH", ["NAME"]);
    roff.text([roman(format!("rtrun, mpiexec - {ABOUT}"))]);
    roff.control("SH", ["SYNOPSIS"]);
    let (name, rest) = USAGE.split_once(' ').unwrap_or((USAGE, ""));
    roff.text([bold(name), roman(format!(" {rest}")), line_break(), bold("mpiexec"), roman(format!(" {rest}"))]);
    // Writing to a Vec cannot fail.
    let _ = roff.to_writer(&mut parts[0]);
    let _ = man.render_description_section(&mut parts[1]);
    let _ = man.render_options_section(&mut parts[2]);

    let mut roff = Roff::new();
    for section in SECTIONS {
        roff.control("SH", [section.title.to_uppercase().as_str()]);
        for part in section.parts {
            match part {
                Para(text) => {
                    roff.control("PP", []);
                    roff.text([roman(*text)]);
                }
                Item(term, text) => {
                    roff.control("TP", []);
                    roff.text([bold(*term)]);
                    roff.text([roman(*text)]);
                }
                Code(text) => {
                    roff.control("RS", ["4"]);
                    roff.control("nf", []);
                    roff.text([roman(*text)]);
                    roff.control("fi", []);
                    roff.control("RE", []);
                }
            }
        }
    }
    let _ = roff.to_writer(&mut parts[3]);

    // `Man::render_title` would leave the date out of `.TH` (an empty argument), moving
    // the source into its place: written here.
    let mut page = format!(
        ".\\\" rtrun(1), generated from rtrun's clap definition (launch/src/cli/) by `rtrun --generate-man`\n\
         {APOSTROPHES}.TH RTRUN 1 \"\" \"runthrough {version}\" \"User Commands\"\n"
    );
    for part in parts {
        let text = String::from_utf8_lossy(&part);
        page += text.strip_prefix(APOSTROPHES).unwrap_or(&text);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::command;

    #[test]
    fn the_clap_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn the_man_page_has_every_option_and_section() {
        let page = man_page();
        let roff = |s: &str| s.replace('-', "\\-");
        assert!(page
            .contains(&format!(".TH RTRUN 1 \"\" \"runthrough {}\" \"User Commands\"\n", env!("CARGO_PKG_VERSION"))));
        assert_eq!(page.matches(APOSTROPHES).count(), 1, "{page}");
        for section in
            ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS"].into_iter().chain(SECTIONS.iter().map(|s| s.title))
        {
            let title = section.to_uppercase();
            let title = if title.contains(' ') { format!("\"{title}\"") } else { title };
            assert!(page.contains(&format!("\n.SH {title}\n")), "no section {section}:\n{page}");
        }
        for a in command().get_arguments().filter(|a| !a.is_hide_set()) {
            let names =
                a.get_long().map(|l| format!("--{l}")).into_iter().chain(a.get_short().map(|s| format!("-{s}")));
            for name in names {
                assert!(page.contains(&format!("\\fB{}\\fR", roff(&name))), "{name} not in the man page");
            }
        }
        assert!(!page.contains("generate\\-man"), "hidden");
        assert!(page.contains("\\fBrtrun\\fR \\-n N [options]"), "{page}");
    }

    #[test]
    fn help_text_has_the_sections_but_the_installed_files() {
        let text = help_text();
        for s in SECTIONS {
            assert_eq!(text.contains(&format!("{}:\n", s.title)), !s.man_only, "{}", s.title);
        }
        // No line of it may pass for an option (tests/install.rs reads those from --help).
        assert!(text.lines().all(|l| !l.trim_start().starts_with('-')), "{text}");
    }
}
