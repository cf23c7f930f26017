//! The progress thread moves long receives while the application computes (docs/ARCHITECTURE.md
//! §2; `src/runtime.rs` `BACKGROUND_PULL_ROUNDS`).
//!
//! A progress call pulls rendezvous until it copied about 1 MiB (so the engine lock is not
//! held for a window of long pulls). While the application computes, only the progress
//! thread calls progress, once a tick; it therefore makes up to `BACKGROUND_PULL_ROUNDS`
//! calls a tick while pulls wait. With a tick of 200 ms and a 1 s computation, all 48
//! messages of 1 MiB arrive during the computation only if those rounds run (one call a
//! tick would pull about 5). Checked: with the rounds removed (the loop made empty) the
//! test fails with `last_done_at_first_test=false`.

mod common;

use std::time::Duration;

use common::{example, ok, run_env};

#[test]
fn the_progress_thread_pulls_a_long_receive_while_the_application_computes() {
    // Also with the engine lock unbiased: the progress thread then bumps a plain guard
    // between its rounds (that once issued an unregistered membarrier and aborted).
    for bias in ["1", "0"] {
        let prog = example("background_pull");
        let env = [
            // Pulled by CMA from 512 KiB, whatever the host's timing would choose.
            ("RT_CMA_MIN", "524288"),
            // A tick of 200 ms: min(period / 2, watch).
            ("RT_FT_PERIOD_MS", "400"),
            ("RT_FT_TIMEOUT_MS", "10000"),
            ("RT_WATCH_MS", "200"),
            ("RT_ENGINE_LOCK_BIAS", bias),
        ];
        let o = run_env(&["-n", "2", prog.to_str().unwrap(), "48", "1000"], &env, Duration::from_secs(60));
        let out = ok(&o);
        assert!(out.contains("background_pull: ok rank=0"), "bias {bias}: {out}");
        assert!(
            out.contains("background_pull: ok rank=1 last_done_at_first_test=true count=48"),
            "bias {bias}: the last receive was not complete after the computation: {out}"
        );
    }
}
