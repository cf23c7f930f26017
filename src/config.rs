//! What [`init_with`](crate::init_with) reads: the job's settings, taken from the
//! environment once ([`Config::from_env`], what [`init`](crate::init) does) or built in
//! code by a program that starts without `rtrun`.
//!
//! `init` never writes the environment (`std::env::set_var` races with the C library's
//! `getenv` in threads the application may already have started). What libfabric must
//! read from its own environment (`FI_TCP_IFACE`, `FI_OFI_RXM_MSG_RX_SIZE`) the launcher
//! exports before it executes the ranks; a rank started another way pins its endpoint
//! through the fabric hints (the address it binds to) and takes libfabric's defaults for
//! the rest.
//!
//! Every setting has the name of its environment variable (`rtrun --info` lists them);
//! the typed setters below are shorthands for the common ones.
//!
//! ```no_run
//! use std::time::Duration;
//! let rt = runthrough::init_with(
//!     runthrough::Config::from_env().ft_timeout(Duration::from_millis(500)).transport("shm"),
//! )?;
//! # Ok::<(), runthrough::Error>(())
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use crate::Error;

/// The settings `init_with` reads, by environment-variable name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    vars: BTreeMap<String, String>,
}

impl Config {
    /// No setting at all: every default, and no launcher (a singleton world).
    pub fn new() -> Config {
        Config::default()
    }

    /// This process's environment as it is now (variables whose name or value is not
    /// UTF-8 are left out: no setting has such a name, and no value may be).
    pub fn from_env() -> Config {
        let vars = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        Config { vars: vars.collect() }
    }

    /// Sets the variable `name` (one of `rtrun --info`'s, or a launcher's) to `value`.
    #[must_use]
    pub fn var(mut self, name: &str, value: impl Into<String>) -> Config {
        self.vars.insert(name.to_owned(), value.into());
        self
    }

    /// Removes the variable `name`: its default applies.
    #[must_use]
    pub fn unset(mut self, name: &str) -> Config {
        self.vars.remove(name);
        self
    }

    /// `RT_TRANSPORT`: `auto` (shared memory on a host, libfabric between hosts), `shm`
    /// or `fabric`.
    #[must_use]
    pub fn transport(self, mode: &str) -> Config {
        self.var("RT_TRANSPORT", mode)
    }

    /// `RT_PROVIDER`: the libfabric provider (`auto`, `tcp`, `sockets`, `verbs`, `cxi`).
    #[must_use]
    pub fn provider(self, name: &str) -> Config {
        self.var("RT_PROVIDER", name)
    }

    /// `RT_FT_PERIOD_MS`: the failure detector's heartbeat period.
    #[must_use]
    pub fn ft_period(self, d: Duration) -> Config {
        self.var("RT_FT_PERIOD_MS", d.as_millis().max(1).to_string())
    }

    /// `RT_FT_TIMEOUT_MS`: how long a peer may stay silent before it is declared failed.
    #[must_use]
    pub fn ft_timeout(self, d: Duration) -> Config {
        self.var("RT_FT_TIMEOUT_MS", d.as_millis().max(1).to_string())
    }

    /// `RT_FT=0`: no failure detector.
    #[must_use]
    pub fn no_ft(self) -> Config {
        self.var("RT_FT", "0")
    }

    /// `RT_FABRIC_IFACE`: the interface whose first IPv4 address the fabric endpoint
    /// binds to.
    #[must_use]
    pub fn fabric_iface(self, iface: &str) -> Config {
        self.var("RT_FABRIC_IFACE", iface)
    }

    /// `RT_FABRIC_ADDR`: the address the fabric endpoint binds to.
    #[must_use]
    pub fn fabric_addr(self, ip: std::net::IpAddr) -> Config {
        self.var("RT_FABRIC_ADDR", ip.to_string())
    }

    /// `RT_LOG`: this process's log filter (`info`, `debug`, `runthrough_engine=trace`).
    #[must_use]
    pub fn log(self, filter: &str) -> Config {
        self.var("RT_LOG", filter)
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// Whether `name` is set to `0` (how every on-by-default switch is turned off).
    pub(crate) fn off(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| v.trim() == "0")
    }

    /// Whether `name` is set to `1`.
    pub(crate) fn on(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| v.trim() == "1")
    }

    /// `name` as a number, `default` when unset; an error names the variable.
    pub(crate) fn num(&self, name: &str, default: u64) -> Result<u64, Error> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| Error::Init(format!("{name}={v:?} is not a number"))),
        }
    }

    /// `name` as milliseconds, if set.
    pub(crate) fn millis(&self, name: &str) -> Result<Option<Duration>, Error> {
        self.get(name)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|_| Error::Init(format!("{name}={v:?}: expected milliseconds")))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters_name_their_variables() {
        let c = Config::new()
            .transport("shm")
            .ft_timeout(Duration::from_millis(250))
            .ft_period(Duration::from_micros(10))
            .var("RT_EAGER_LIMIT", "4096");
        assert_eq!(c.get("RT_TRANSPORT"), Some("shm"));
        assert_eq!(c.get("RT_FT_TIMEOUT_MS"), Some("250"));
        assert_eq!(c.get("RT_FT_PERIOD_MS"), Some("1"), "rounded up to a millisecond");
        assert_eq!(c.num("RT_EAGER_LIMIT", 1).unwrap(), 4096);
        assert_eq!(c.num("RT_SPIN_POLLS", 7).unwrap(), 7);
        let e = c.clone().var("RT_EAGER_LIMIT", "lots").num("RT_EAGER_LIMIT", 1).unwrap_err().to_string();
        assert!(e.contains("RT_EAGER_LIMIT") && e.contains("lots"), "{e}");
        assert!(c.clone().no_ft().off("RT_FT"));
        assert_eq!(c.clone().unset("RT_TRANSPORT").get("RT_TRANSPORT"), None);
        assert_eq!(c.millis("RT_FT_TIMEOUT_MS").unwrap(), Some(Duration::from_millis(250)));
        assert!(c.var("X", "soon").millis("X").is_err());
    }

    #[test]
    fn from_env_is_a_snapshot() {
        let c = Config::from_env();
        assert_eq!(c.get("PATH").map(str::to_owned), std::env::var("PATH").ok());
    }
}
