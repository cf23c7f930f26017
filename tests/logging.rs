//! `RT_LOG`: the log users can turn on (`runthrough_launch::logging`). With
//! `RT_LOG=debug`, `rtrun` and every rank print their events on stderr, each line
//! labelled with its writer; a narrower filter narrows them; unset, nothing is printed;
//! a filter that does not parse is reported and the job runs. And `--report-bindings`.

mod common;

use std::time::Duration;

use common::*;

fn ring(env: &[(&str, &str)]) -> (String, String) {
    let prog = example("ring");
    let o = run_env(&["-n", "2", prog.to_str().unwrap()], env, Duration::from_secs(60));
    let out = ok(&o);
    (out, stderr(&o))
}

#[test]
fn rt_log_turns_on_the_launcher_s_and_every_rank_s_events() {
    let (_, err) = ring(&[("RT_LOG", "debug")]);
    assert!(err.lines().any(|l| l.starts_with("rtrun: DEBUG runthrough_launch::job:")), "{err}");
    for r in 0..2 {
        let want = format!("rank {r}: DEBUG runthrough::boot: inbound rings placed");
        assert!(err.lines().any(|l| l.starts_with(&want)), "rank {r}:\n{err}");
    }
    // A filter by target: the launcher's events only.
    let (_, err) = ring(&[("RT_LOG", "runthrough_launch=debug")]);
    assert!(err.lines().any(|l| l.starts_with("rtrun: DEBUG")), "{err}");
    assert!(!err.contains("runthrough::boot"), "{err}");
    // Unset (RT_LOG and RT_DEBUG removed from the job's environment): nothing.
    let (_, err) = ring(&[("RT_LOG", ""), ("RT_DEBUG", "")]);
    assert!(!err.contains("DEBUG"), "{err}");
    // A filter that does not parse: one line each, and the job runs.
    let (out, err) = ring(&[("RT_LOG", "bad[")]);
    assert!(err.contains("rtrun: RT_LOG=\"bad[\" is not a log filter"), "{err}");
    assert!(err.contains("rank 0: RT_LOG=\"bad[\" is not a log filter"), "{err}");
    assert!(out.contains("ring"), "{out}");
}

/// `rtrun --report-bindings`: every rank says on stderr how it is bound and which CPUs
/// the kernel lets it run on. `--bind-to core` gives each rank a whole physical core (its
/// CPUs are the core's hardware threads, as `/sys` lists its siblings), two ranks two
/// cores; `--bind-to hwthread` one logical CPU each. Without the option, nothing.
/// `--oversubscribe` is accepted.
#[test]
fn report_bindings_names_every_rank_s_cpus() {
    let prog = example("ring");
    let cpus_of = |bind: &str| -> Vec<String> {
        let o = run(
            &["-n", "2", "--bind-to", bind, "--report-bindings", "--oversubscribe", prog.to_str().unwrap()],
            Duration::from_secs(60),
        );
        ok(&o);
        let err = stderr(&o);
        (0..2)
            .map(|r| {
                let line = err
                    .lines()
                    .find(|l| l.starts_with(&format!("rtrun: rank {r} on ")))
                    .unwrap_or_else(|| panic!("--bind-to {bind}: no binding line for rank {r}:\n{err}"));
                assert!(line.contains(": bound to core "), "rank {r}: {line}");
                line.rsplit("; CPUs ").next().unwrap_or("").to_owned()
            })
            .collect()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (r, list) in cpus_of("core").iter().enumerate() {
        let first = list.split([',', '-']).next().unwrap_or("");
        let siblings =
            std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{first}/topology/thread_siblings_list"))
                .unwrap_or_else(|e| panic!("cpu{first}'s siblings: {e}"));
        assert_eq!(list, siblings.trim(), "rank {r} is bound to CPUs {list}, its core has {}", siblings.trim());
    }
    let threads = cpus_of("hwthread");
    for (r, list) in threads.iter().enumerate() {
        assert!(list.parse::<u32>().is_ok(), "rank {r} may run on more than one CPU: {list}");
    }
    if cores >= 2 {
        assert_ne!(threads[0], threads[1], "two ranks bound to one CPU");
    }
    let o = run(&["-n", "2", prog.to_str().unwrap()], Duration::from_secs(60));
    ok(&o);
    assert!(!stderr(&o).contains("rtrun: rank"), "{}", stderr(&o));
}

/// Issue 37 item 6: `init` never writes the environment; what libfabric reads from its
/// own environment `rtrun` exports before it executes the ranks (the rxm pool, and
/// loopback for the IP providers on one host), and a value the user gave wins.
#[test]
fn init_leaves_the_environment_alone_and_rtrun_exports_libfabric_s_settings() {
    let prog = example("config_check");
    for transport in ["shm", "fabric"] {
        let env = [("RT_TRANSPORT", transport), ("RT_PROVIDER", "tcp")];
        let o = run_env(&["-n", "3", prog.to_str().unwrap(), "env"], &env, Duration::from_secs(60));
        let out = ok(&o);
        for r in 0..3 {
            let want = format!("config_check: rank {r} env unchanged; FI_OFI_RXM_MSG_RX_SIZE=256 FI_TCP_IFACE=lo");
            assert!(out.lines().any(|l| l == want), "{transport}, rank {r}:\n{out}");
        }
    }
    let env = [("RT_TRANSPORT", "fabric"), ("RT_PROVIDER", "tcp")];
    let o = run_env(
        &["-n", "2", "-x", "FI_OFI_RXM_MSG_RX_SIZE=64", prog.to_str().unwrap(), "env"],
        &env,
        Duration::from_secs(60),
    );
    let out = ok(&o);
    assert_eq!(out.matches("env unchanged; FI_OFI_RXM_MSG_RX_SIZE=64 FI_TCP_IFACE=lo").count(), 2, "{out}");
}

/// `init_with` reads the `Config` it is given, not the environment: a program started
/// without `rtrun` configures itself in code.
#[test]
fn init_with_reads_its_config_and_not_the_environment() {
    let o =
        std::process::Command::new(example("config_check")).arg("conf").env("RT_EAGER_LIMIT", "lots").output().unwrap();
    let out = stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    assert!(
        out.contains("config_check: init refused the environment: ") && out.contains("RT_EAGER_LIMIT=\"lots\""),
        "{out}"
    );
    assert!(out.contains("config_check: init_with refused the config: "), "{out}");
    assert!(out.contains("config_check: init_with(Config::new()) ran a world of 1"), "{out}");
}
