//! `init` reads its settings from a [`runthrough::Config`] and never writes the
//! environment (issue 37 item 6). Two modes:
//!
//! - `env` (under `rtrun`): the environment before and after `init` is the same, and the
//!   libfabric variables the launcher exported (`FI_OFI_RXM_MSG_RX_SIZE`, `FI_TCP_IFACE`)
//!   are printed; every rank prints `config_check: rank R env unchanged`.
//! - `conf` (no launcher): `init_with` takes what the `Config` says and not what the
//!   environment says: the test sets `RT_EAGER_LIMIT=lots` in the environment, which
//!   `init` refuses and `init_with(Config::new())` ignores, and a `Config` holding
//!   `RT_EAGER_LIMIT=many` is refused naming the variable.

use std::collections::BTreeMap;

fn snapshot() -> BTreeMap<std::ffi::OsString, std::ffi::OsString> {
    std::env::vars_os().collect()
}

fn main() -> Result<(), runthrough::Error> {
    match std::env::args().nth(1).as_deref() {
        Some("env") => {
            let before = snapshot();
            let rt = runthrough::init()?;
            let after = snapshot();
            let rank = rt.world().rank();
            let changed: Vec<_> = after.iter().filter(|(k, v)| before.get(*k) != Some(v)).map(|(k, _)| k).collect();
            let gone: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
            if changed.is_empty() && gone.is_empty() {
                let var = |k| std::env::var(k).unwrap_or_else(|_| "unset".into());
                println!(
                    "config_check: rank {rank} env unchanged; FI_OFI_RXM_MSG_RX_SIZE={} FI_TCP_IFACE={}",
                    var("FI_OFI_RXM_MSG_RX_SIZE"),
                    var("FI_TCP_IFACE")
                );
            } else {
                println!("config_check: rank {rank} init changed {changed:?}, removed {gone:?}");
            }
            rt.world().barrier()?;
            rt.finalize()
        }
        Some("conf") => {
            match runthrough::init() {
                Err(e) if e.to_string().contains("RT_EAGER_LIMIT") => {
                    println!("config_check: init refused the environment: {e}")
                }
                other => {
                    println!("config_check: init took RT_EAGER_LIMIT={:?}: {other:?}", std::env::var("RT_EAGER_LIMIT"))
                }
            }
            let bad = runthrough::Config::new().var("RT_EAGER_LIMIT", "many");
            match runthrough::init_with(bad) {
                Err(e) if e.to_string().contains("RT_EAGER_LIMIT=\"many\"") => {
                    println!("config_check: init_with refused the config: {e}")
                }
                other => println!("config_check: init_with took RT_EAGER_LIMIT=many: {other:?}"),
            }
            let rt =
                runthrough::init_with(runthrough::Config::new().ft_timeout(std::time::Duration::from_millis(300)))?;
            println!("config_check: init_with(Config::new()) ran a world of {}", rt.world().size());
            rt.finalize()
        }
        _ => {
            eprintln!("usage: config_check env|conf");
            std::process::exit(2)
        }
    }
}
