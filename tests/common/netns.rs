//! The 3-host cluster of `ci-containers/netns-cluster.sh` (network namespaces on a private
//! bridge), brought up by the first test of a binary that needs it and torn down by a
//! guard when the last one ends, also when a test fails. `tag`/`net` name a cluster of
//! its own (`NETNS_TAG`, `NETNS_NET`: e.g. `rs`, `10.78.0`), so test binaries running side
//! by side never share one; `None` is the default `rt-h*` cluster on 10.77.0.0/24.
//!
//! The only allowed skip: when this machine cannot create network namespaces (not root,
//! no `ip`, no netns support), [`cluster`] skips as `netns` ([`super::skip()`]: a failure
//! unless `RT_EXPECTED_SKIPS` names it) and returns `None`.

use std::process::{Command, Output};
use std::sync::Mutex;

/// Number of live [`Cluster`] guards of this test binary; the cluster exists while it is
/// non-zero.
static USERS: Mutex<usize> = Mutex::new(0);

/// Which cluster: `None` for the default one, else `(NETNS_TAG, NETNS_NET)`.
pub(crate) type Which = Option<(&'static str, &'static str)>;

fn script(which: Which, args: &[&str]) -> Output {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/ci-containers/netns-cluster.sh");
    let mut cmd = Command::new("timeout");
    cmd.arg("60").arg("bash").arg(path).args(args);
    if let Some((tag, net)) = which {
        cmd.env("NETNS_TAG", tag).env("NETNS_NET", net);
    }
    cmd.output().expect("run netns-cluster.sh")
}

/// The 3-host cluster, up while a guard lives.
pub(crate) struct Cluster {
    which: Which,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut users = USERS.lock().unwrap_or_else(|p| p.into_inner());
        *users -= 1;
        if *users == 0 {
            let o = script(self.which, &["down"]);
            if !o.status.success() {
                eprintln!("netns-cluster.sh down failed: {}", String::from_utf8_lossy(&o.stderr));
            }
        }
    }
}

/// The cluster, or `None` after [`super::skip()`] (`netns`) said why the test is skipped.
pub(crate) fn cluster(which: Which) -> Option<Cluster> {
    let mut users = USERS.lock().unwrap_or_else(|p| p.into_inner());
    if *users == 0 {
        let o = script(which, &["up", "3"]);
        match o.status.code() {
            Some(0) => {}
            Some(3) => {
                super::skip("netns", String::from_utf8_lossy(&o.stderr).trim());
                return None;
            }
            _ => panic!(
                "netns-cluster.sh up 3 failed: {:?}\nstdout:\n{}\nstderr:\n{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        }
    }
    *users += 1;
    Some(Cluster { which })
}
