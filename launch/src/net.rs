//! The interfaces of this host (of this network namespace) and their addresses, so a rank
//! can pin its fabric endpoint to the interface that holds its address (`RT_FABRIC_ADDR`)
//! or find the address of a named interface (`RT_FABRIC_IFACE`).

use std::io;
use std::net::IpAddr;

/// One address of one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    /// Interface name, e.g. `eth0`, `rtn-h1`.
    pub iface: String,
    /// The address.
    pub ip: IpAddr,
    /// Whether the interface is up.
    pub up: bool,
}

/// Every IPv4 and IPv6 address of every interface (`getifaddrs`).
///
/// # Errors
/// The `getifaddrs` error.
pub fn addresses() -> io::Result<Vec<IfAddr>> {
    Ok(crate::sys::interface_addresses()?.into_iter().map(|(iface, ip, up)| IfAddr { iface, ip, up }).collect())
}

/// The interface holding `ip`, if any.
pub fn iface_of(addrs: &[IfAddr], ip: IpAddr) -> Option<&IfAddr> {
    addrs.iter().find(|a| a.ip == ip)
}

/// The first IPv4 address of interface `iface`.
pub fn ipv4_of<'a>(addrs: &'a [IfAddr], iface: &str) -> Option<&'a IfAddr> {
    addrs.iter().find(|a| a.iface == iface && a.ip.is_ipv4())
}

/// The first IPv4 address of an interface that is up and not loopback (the default
/// fabric address of a rank in a multi-host run without `RT_FABRIC_ADDR`).
pub fn first_non_loopback_ipv4(addrs: &[IfAddr]) -> Option<&IfAddr> {
    addrs.iter().find(|a| a.up && a.ip.is_ipv4() && !a.ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        let a = |iface: &str, ip: &str, up| IfAddr { iface: iface.into(), ip: ip.parse().unwrap(), up };
        let list = vec![
            a("lo", "127.0.0.1", true),
            a("lo", "::1", true),
            a("down0", "10.1.0.5", false),
            a("rtn-h1", "fe80::1", true),
            a("rtn-h1", "10.77.0.12", true),
        ];
        assert_eq!(iface_of(&list, "10.77.0.12".parse().unwrap()).unwrap().iface, "rtn-h1");
        assert!(iface_of(&list, "10.77.0.13".parse().unwrap()).is_none());
        assert_eq!(ipv4_of(&list, "rtn-h1").unwrap().ip.to_string(), "10.77.0.12");
        assert!(ipv4_of(&list, "eth9").is_none());
        assert_eq!(first_non_loopback_ipv4(&list).unwrap().iface, "rtn-h1");
        assert!(first_non_loopback_ipv4(&list[..2]).is_none());
    }

    #[test]
    fn this_host_has_loopback() {
        let list = addresses().unwrap();
        assert!(list.iter().any(|a| a.ip.is_loopback()), "{list:?}");
    }
}
