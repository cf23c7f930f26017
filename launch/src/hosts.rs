//! Multi-host placement for `rtrun --host` (docs/ARCHITECTURE.md §6).
//!
//! - [`parse_hosts`]: `--host h1,h2` or `--host h1=10.77.0.11,h2=10.77.0.12` — host names
//!   (what the launch agent gets as `{host}` and each rank as `RT_NODE`), each with an
//!   optional address its ranks' fabric endpoints bind to (`RT_FABRIC_ADDR`).
//! - [`place`]: ranks to hosts, round-robin ([`MapBy::Node`], the default) or filling each
//!   host with `ceil(n / hosts)` ranks ([`MapBy::Slot`]), with the per-host local rank and
//!   size (`RT_LOCAL_RANK`, `RT_LOCAL_SIZE`).
//! - [`Agent`]: the launch agent template (`'ssh {host}'`, `'ip netns exec {host}'`), split
//!   on whitespace, `{host}` substituted in every word, the rank's command appended — the
//!   way mpirun's rsh agent works.
//! - [`kv_ip_allowed`]: the addresses the key-value service may be bound to and ranks may
//!   connect to: loopback, or a private address (IPv4 RFC 1918, IPv6 unique local), never a
//!   wildcard or public one.

use std::fmt;
use std::net::IpAddr;

/// Largest number of hosts `--host` accepts.
pub const MAX_HOSTS: usize = 4096;

/// One `--host` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// The host name: `{host}` in the agent template and `RT_NODE` of its ranks.
    pub name: String,
    /// The address its ranks' fabric endpoints bind to (`name=IP`), if given.
    pub addr: Option<IpAddr>,
    /// How many ranks it takes per round of `--map-by slot` (a hostfile's `slots=N` or
    /// `name:N`), if given.
    pub slots: Option<u32>,
}

impl fmt::Display for HostSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            Some(a) => write!(f, "{}={a}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Why a `--host` list is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The list or one entry is empty.
    #[error("empty host name")]
    Empty,
    /// A host name with characters other than letters, digits, `.`, `-`, `_`.
    #[error("invalid host name {0:?}: use letters, digits, '.', '-' and '_'")]
    BadName(String),
    /// `name=IP` with an IP that does not parse or cannot be bound.
    #[error("invalid address {addr:?} for host {name}: expected a unicast IP address")]
    BadAddr {
        /// The host.
        name: String,
        /// The address given.
        addr: String,
    },
    /// The same host twice.
    #[error("host {0} is listed twice")]
    Duplicate(String),
    /// A hostfile line that is neither `name [slots=N]` nor `name:N`.
    #[error("hostfile line {line}: {text:?}: expected NAME[=IP] [slots=N] or NAME:N")]
    BadLine {
        /// Its number (from 1).
        line: usize,
        /// Its text.
        text: String,
    },
    /// More than [`MAX_HOSTS`].
    #[error("more than {MAX_HOSTS} hosts")]
    TooMany,
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Parses `h1,h2,...` where each entry is `NAME` or `NAME=IP`.
///
/// # Errors
/// [`HostError`] for an empty list or entry, a bad name or address, or a duplicate name.
pub fn parse_hosts(s: &str) -> Result<Vec<HostSpec>, HostError> {
    let mut out: Vec<HostSpec> = Vec::new();
    for entry in s.split(',') {
        let entry = entry.trim();
        let (name, addr) = match entry.split_once('=') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (entry, None),
        };
        if name.is_empty() {
            return Err(HostError::Empty);
        }
        if !valid_name(name) {
            return Err(HostError::BadName(name.to_owned()));
        }
        let addr = match addr {
            None => None,
            Some(a) => {
                let ip: IpAddr =
                    a.parse().map_err(|_| HostError::BadAddr { name: name.to_owned(), addr: a.to_owned() })?;
                if ip.is_unspecified() || ip.is_multicast() {
                    return Err(HostError::BadAddr { name: name.to_owned(), addr: a.to_owned() });
                }
                Some(ip)
            }
        };
        if out.iter().any(|h| h.name == name) {
            return Err(HostError::Duplicate(name.to_owned()));
        }
        if out.len() == MAX_HOSTS {
            return Err(HostError::TooMany);
        }
        out.push(HostSpec { name: name.to_owned(), addr, slots: None });
    }
    Ok(out)
}

/// Parses a hostfile in Open MPI's (`name slots=N`, other `key=value` words such as
/// `max_slots=M` accepted and ignored) or MPICH's (`name:N`) format, one host a line,
/// `#` comments and blank lines skipped; `name=IP` as in `--host`. A host listed again
/// adds its slots to its first line's.
///
/// # Errors
/// [`HostError`]: a line of neither form, a bad name, address or slot count, no host.
pub fn parse_hostfile(text: &str) -> Result<Vec<HostSpec>, HostError> {
    let mut out: Vec<HostSpec> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = || HostError::BadLine { line: i + 1, text: raw.to_owned() };
        let mut words = line.split_whitespace();
        let first = words.next().ok_or_else(bad)?;
        let (entry, mut slots) = match first.rsplit_once(':') {
            // MPICH's name:N (an IPv6 address is given as name=IP, never bare).
            Some((n, k)) if !n.contains('=') => (n, Some(k.parse::<u32>().map_err(|_| bad())?)),
            _ => (first, None),
        };
        for w in words {
            match w.split_once('=') {
                Some(("slots", k)) => slots = Some(k.parse::<u32>().map_err(|_| bad())?),
                Some((_, _)) => {}
                None => return Err(bad()),
            }
        }
        if slots == Some(0) {
            return Err(bad());
        }
        let mut spec = parse_hosts(entry)?.pop().ok_or_else(bad)?;
        spec.slots = slots;
        let full = out.len() == MAX_HOSTS;
        match out.iter_mut().find(|h| h.name == spec.name) {
            Some(h) => h.slots = Some(h.slots.unwrap_or(1) + spec.slots.unwrap_or(1)),
            None if full => return Err(HostError::TooMany),
            None => out.push(spec),
        }
    }
    if out.is_empty() {
        return Err(HostError::Empty);
    }
    Ok(out)
}

/// How ranks are spread over hosts (`--map-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapBy {
    /// Round-robin: rank `r` on host `r % hosts` (default).
    #[default]
    Node,
    /// Fill: each host gets `ceil(n / hosts)` consecutive ranks before the next.
    Slot,
}

impl MapBy {
    /// The command-line spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MapBy::Node => "node",
            MapBy::Slot => "slot",
        }
    }
}

/// Where one rank runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Index into the host list.
    pub host: usize,
    /// Rank among the ranks of that host (`RT_LOCAL_RANK`).
    pub local_rank: u32,
    /// Number of ranks on that host (`RT_LOCAL_SIZE`).
    pub local_size: u32,
}

/// Places `ranks` ranks on `hosts` hosts (`hosts >= 1`), one [`Placement`] per rank.
/// Hosts may end up with no rank (more hosts than ranks, or `Slot` rounding up).
pub fn place(ranks: u32, hosts: usize, map_by: MapBy) -> Vec<Placement> {
    let hosts = hosts.max(1);
    let per = (ranks as usize).div_ceil(hosts).max(1);
    placements(ranks, hosts, |r| match map_by {
        MapBy::Node => r % hosts,
        MapBy::Slot => (r / per).min(hosts - 1),
    })
}

/// One [`Placement`] per rank of `ranks` over `hosts` hosts, rank `r` on `host_of(r)`.
fn placements(ranks: u32, hosts: usize, host_of: impl Fn(usize) -> usize) -> Vec<Placement> {
    let mut count = vec![0u32; hosts];
    let mut out: Vec<Placement> = (0..ranks as usize)
        .map(|r| {
            let host = host_of(r);
            let local_rank = count[host];
            count[host] += 1;
            Placement { host, local_rank, local_size: 0 }
        })
        .collect();
    for p in &mut out {
        p.local_size = count[p.host];
    }
    out
}

/// Places `ranks` ranks on `hosts` ([`place`]), except that `--map-by slot` over hosts
/// with slot counts fills each host with its slots in turn (a host without a count has
/// one), and starts over at the first host when all are full (oversubscribed, as MPICH
/// does).
pub fn place_on(ranks: u32, hosts: &[HostSpec], map_by: MapBy) -> Vec<Placement> {
    if map_by != MapBy::Slot || hosts.iter().all(|h| h.slots.is_none()) {
        return place(ranks, hosts.len(), map_by);
    }
    let order: Vec<usize> =
        hosts.iter().enumerate().flat_map(|(i, h)| std::iter::repeat_n(i, h.slots.unwrap_or(1) as usize)).collect();
    placements(ranks, hosts.len(), |r| order[r % order.len()])
}

/// A parsed `--launch-agent` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    words: Vec<String>,
}

/// Why a launch agent template is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// No words.
    #[error("the launch agent template is empty")]
    Empty,
    /// No `{host}` anywhere: every rank would start the same way.
    #[error("the launch agent template {0:?} has no {{host}}")]
    NoHost(String),
    /// Quotes are not interpreted; they would reach the agent literally.
    #[error("the launch agent template {0:?} contains quotes; words are split on whitespace only")]
    Quotes(String),
    /// An agent that would not pass standard input on, where the job secret travels.
    #[error(
        "the launch agent template {0:?} does not pass standard input on, where each rank gets the job's secret: {1}"
    )]
    NoStdin(String, &'static str),
}

impl Agent {
    /// Parses a template: words separated by whitespace (no quoting), at least one
    /// `{host}`.
    ///
    /// # Errors
    /// [`AgentError`] for an empty template, one without `{host}`, or one with quotes.
    pub fn parse(template: &str) -> Result<Agent, AgentError> {
        let words: Vec<String> = template.split_whitespace().map(str::to_owned).collect();
        if words.is_empty() {
            return Err(AgentError::Empty);
        }
        if template.contains(['\'', '"']) {
            return Err(AgentError::Quotes(template.to_owned()));
        }
        if !words.iter().any(|w| w.contains("{host}")) {
            return Err(AgentError::NoHost(template.to_owned()));
        }
        if let Some(fix) = stdin_fix(&words) {
            return Err(AgentError::NoStdin(template.to_owned(), fix));
        }
        Ok(Agent { words })
    }

    /// The agent's command words for `host`: the template with every `{host}` replaced.
    /// The rank's own command (`env VAR=VALUE... PROGRAM ARGS`) follows them.
    pub fn command(&self, host: &str) -> Vec<String> {
        self.words.iter().map(|w| w.replace("{host}", host)).collect()
    }
}

/// What to change in an agent's words that would close the rank's standard input (the
/// secret's way, see `crate::env`): the common launchers' switches, checked before the
/// first `{host}` word (the options of the agent itself).
fn stdin_fix(words: &[String]) -> Option<&'static str> {
    let name = words.first().map(|w| w.rsplit('/').next().unwrap_or(w))?;
    let opts: Vec<&str> = words[1..].iter().take_while(|w| !w.contains("{host}")).map(String::as_str).collect();
    // Short options may be grouped (`-it`).
    let short = |c: char| {
        opts.iter().any(|o| {
            o.len() > 1 && o.starts_with('-') && o[1..].bytes().all(|b| b.is_ascii_alphabetic()) && o[1..].contains(c)
        })
    };
    match name {
        "docker" | "podman" if opts.first() == Some(&"exec") && !short('i') && !opts.contains(&"--interactive") => {
            Some("add -i (`docker exec -i {host}`)")
        }
        "ssh" if short('n') => Some("drop -n"),
        _ => None,
    }
}

/// Whether `v` passes through a launch agent's command line unchanged, including one that
/// hands it to a remote shell (`ssh`): no whitespace, quotes or shell metacharacters.
pub fn shell_safe(v: &str) -> bool {
    v.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./:,=@%+-".contains(&b))
}

/// Whether the key-value service may listen on / ranks may connect to `ip`: loopback, or
/// a private address (IPv4 10/8, 172.16/12, 192.168/16; IPv6 fc00::/7).
pub fn kv_ip_allowed(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private(),
        IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts_of(p: &[Placement]) -> Vec<usize> {
        p.iter().map(|x| x.host).collect()
    }

    #[test]
    fn round_robin_by_node() {
        let p = place(6, 3, MapBy::Node);
        assert_eq!(hosts_of(&p), [0, 1, 2, 0, 1, 2]);
        assert_eq!(p.iter().map(|x| x.local_rank).collect::<Vec<_>>(), [0, 0, 0, 1, 1, 1]);
        assert!(p.iter().all(|x| x.local_size == 2));
        let p = place(4, 3, MapBy::Node);
        assert_eq!(hosts_of(&p), [0, 1, 2, 0]);
        assert_eq!(p.iter().map(|x| x.local_size).collect::<Vec<_>>(), [2, 1, 1, 2]);
        let p = place(2, 3, MapBy::Node);
        assert_eq!(hosts_of(&p), [0, 1]);
        assert!(p.iter().all(|x| x.local_size == 1 && x.local_rank == 0));
    }

    #[test]
    fn fill_by_slot() {
        let p = place(6, 3, MapBy::Slot);
        assert_eq!(hosts_of(&p), [0, 0, 1, 1, 2, 2]);
        assert_eq!(p.iter().map(|x| x.local_rank).collect::<Vec<_>>(), [0, 1, 0, 1, 0, 1]);
        // ceil(7/3) = 3: 3, 3, 1.
        let p = place(7, 3, MapBy::Slot);
        assert_eq!(hosts_of(&p), [0, 0, 0, 1, 1, 1, 2]);
        assert_eq!(p.iter().map(|x| x.local_size).collect::<Vec<_>>(), [3, 3, 3, 3, 3, 3, 1]);
        // ceil(4/3) = 2: the last host stays empty.
        assert_eq!(hosts_of(&place(4, 3, MapBy::Slot)), [0, 0, 1, 1]);
        assert_eq!(hosts_of(&place(3, 1, MapBy::Slot)), [0, 0, 0]);
        assert_eq!(hosts_of(&place(3, 1, MapBy::Node)), [0, 0, 0]);
    }

    #[test]
    fn hostfiles_of_both_formats() {
        let h =
            parse_hostfile("# cluster\nnode1 slots=4 max_slots=8\n\nnode2:2 # two\nnode3=10.0.0.3\nnode1 slots=2\n")
                .unwrap();
        let got: Vec<(&str, Option<u32>)> = h.iter().map(|h| (h.name.as_str(), h.slots)).collect();
        assert_eq!(got, [("node1", Some(6)), ("node2", Some(2)), ("node3", None)]);
        assert_eq!(h[2].addr, Some("10.0.0.3".parse().unwrap()));
        for bad in ["node1 slots=x", "node1 bogus", "node1:0", "", "# only a comment", "bad/name slots=1"] {
            assert!(parse_hostfile(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn map_by_slot_fills_each_host_s_slots_then_wraps() {
        let h = parse_hostfile("a slots=3\nb slots=1\n").unwrap();
        let hosts_of = |p: &[Placement]| p.iter().map(|p| p.host).collect::<Vec<_>>();
        assert_eq!(hosts_of(&place_on(4, &h, MapBy::Slot)), [0, 0, 0, 1]);
        assert_eq!(hosts_of(&place_on(6, &h, MapBy::Slot)), [0, 0, 0, 1, 0, 0]);
        assert_eq!(place_on(6, &h, MapBy::Slot)[5].local_rank, 4);
        // Round-robin ignores slots.
        assert_eq!(hosts_of(&place_on(3, &h, MapBy::Node)), [0, 1, 0]);
    }

    #[test]
    fn placement_invariants() {
        for map_by in [MapBy::Node, MapBy::Slot] {
            for n in 1..40u32 {
                for h in 1..9usize {
                    let p = place(n, h, map_by);
                    assert_eq!(p.len(), n as usize);
                    for host in 0..h {
                        let on: Vec<_> = p.iter().filter(|x| x.host == host).collect();
                        let locals: Vec<u32> = on.iter().map(|x| x.local_rank).collect();
                        assert_eq!(locals, (0..on.len() as u32).collect::<Vec<_>>(), "{map_by:?} n={n} h={h}");
                        assert!(on.iter().all(|x| x.local_size as usize == on.len()));
                        assert!(on.len() <= (n as usize).div_ceil(h), "balanced: {map_by:?} n={n} h={h}");
                    }
                }
            }
        }
    }

    #[test]
    fn host_lists() {
        let h = parse_hosts("rt-h0=10.77.0.11, rt-h1=10.77.0.12,rt-h2").unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!(h[0], HostSpec { name: "rt-h0".into(), addr: Some("10.77.0.11".parse().unwrap()), slots: None });
        assert_eq!(h[2], HostSpec { name: "rt-h2".into(), addr: None, slots: None });
        assert_eq!(h[1].to_string(), "rt-h1=10.77.0.12");
        assert_eq!(parse_hosts("a.example.org,b_2").unwrap().len(), 2);
        assert_eq!(parse_hosts("n1=fd00::1").unwrap()[0].addr, Some("fd00::1".parse().unwrap()));
        assert_eq!(parse_hosts(""), Err(HostError::Empty));
        assert_eq!(parse_hosts("a,,b"), Err(HostError::Empty));
        assert_eq!(parse_hosts("=10.0.0.1"), Err(HostError::Empty));
        assert!(matches!(parse_hosts("a b"), Err(HostError::BadName(_))));
        assert!(matches!(parse_hosts("a;rm"), Err(HostError::BadName(_))));
        assert!(matches!(parse_hosts("a=10.0.0"), Err(HostError::BadAddr { .. })));
        assert!(matches!(parse_hosts("a=0.0.0.0"), Err(HostError::BadAddr { .. })));
        assert!(matches!(parse_hosts("a=224.0.0.1"), Err(HostError::BadAddr { .. })));
        assert!(matches!(parse_hosts("a="), Err(HostError::BadAddr { .. })));
        assert_eq!(parse_hosts("a,b,a=10.0.0.1"), Err(HostError::Duplicate("a".into())));
    }

    #[test]
    fn agent_templates() {
        let a = Agent::parse("ip netns exec {host}").unwrap();
        assert_eq!(a.command("rt-h1"), ["ip", "netns", "exec", "rt-h1"]);
        let a = Agent::parse("  ssh -o BatchMode=yes {host}  ").unwrap();
        assert_eq!(a.command("n7"), ["ssh", "-o", "BatchMode=yes", "n7"]);
        let a = Agent::parse("docker exec -i node-{host} --label={host}").unwrap();
        assert_eq!(a.command("x"), ["docker", "exec", "-i", "node-x", "--label=x"]);
        assert_eq!(Agent::parse(""), Err(AgentError::Empty));
        assert_eq!(Agent::parse("   "), Err(AgentError::Empty));
        assert!(matches!(Agent::parse("ssh"), Err(AgentError::NoHost(_))));
        assert!(matches!(Agent::parse("ssh {HOST}"), Err(AgentError::NoHost(_))));
        assert!(matches!(Agent::parse("sh -c '{host}'"), Err(AgentError::Quotes(_))));
        // The secret reaches ranks on their standard input: agents that close it are refused.
        for closed in ["docker exec {host}", "/usr/bin/podman exec -t {host}", "ssh -n {host}", "ssh -nT {host}"] {
            assert!(matches!(Agent::parse(closed), Err(AgentError::NoStdin(..))), "{closed}");
        }
        for open in ["docker exec -it {host}", "docker exec --interactive {host}", "ssh -T -oConnectTimeout=5 {host}"] {
            assert!(Agent::parse(open).is_ok(), "{open}");
        }
    }

    #[test]
    fn kv_addresses_and_shell_safety() {
        for ok in ["127.0.0.1", "127.3.2.1", "10.77.0.1", "172.16.5.4", "192.168.1.1", "::1", "fd12::1"] {
            assert!(kv_ip_allowed(ok.parse().unwrap()), "{ok}");
        }
        for bad in ["0.0.0.0", "8.8.8.8", "172.32.0.1", "192.0.2.2", "224.0.0.1", "::", "2001:db8::1", "fe80::1"] {
            assert!(!kv_ip_allowed(bad.parse().unwrap()), "{bad}");
        }
        assert!(shell_safe("10.77.0.1:4000"));
        assert!(shell_safe("/rt-0123abcd-h1"));
        assert!(!shell_safe("a b"));
        assert!(!shell_safe("$(x)"));
        assert!(!shell_safe("a;b"));
    }
}
