//! The client address behind a reverse proxy (`KBOT_TRUSTED_PROXIES`).
//!
//! Sign-in is rate-limited per client address. Behind a proxy every request
//! comes from the proxy's address, so every user would share one limit; the
//! proxy says who the client was in `X-Forwarded-For`. Anyone can send that
//! header, so it is believed only from a configured proxy, and only up to
//! the rightmost address no trusted proxy added: each trusted hop appends
//! the address it heard from, so everything left of the first untrusted
//! one (reading from the right) is whatever the client chose to write.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The header proxies append the address they heard from to.
const FORWARDED_FOR: &str = "x-forwarded-for";

/// The proxies whose `X-Forwarded-For` is believed; none by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<IpNet>);

impl TrustedProxies {
    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request from `peer`: `peer` itself unless it is a
    /// trusted proxy; then the rightmost `X-Forwarded-For` hop that is not
    /// one (or the leftmost hop, when all are). A hop that is no address
    /// ends the walk at the last trusted one: nothing left of it is sure.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer;
        if !self.trusts(peer) {
            return client;
        }
        let hops: Vec<&str> = headers
            .get_all(FORWARDED_FOR)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .collect();
        for hop in hops.iter().rev() {
            let Some(ip) = parse_hop(hop) else {
                return client;
            };
            client = ip;
            if !self.trusts(ip) {
                return client;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, an IPv6 one possibly in
/// brackets, an IPv4 one possibly with a port.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    if let Ok(ip) = hop.parse() {
        return Some(ip);
    }
    let unbracketed = hop.strip_prefix('[').and_then(|h| h.split_once(']'));
    if let Some((ip, _port)) = unbracketed {
        return ip.parse().ok();
    }
    hop.parse::<std::net::SocketAddr>().ok().map(|a| a.ip())
}

/// A `KBOT_TRUSTED_PROXIES` entry: an address (`10.0.0.1`) or a network
/// (`10.0.0.0/8`, `fd00::/8`).
pub fn parse_proxy(entry: &str) -> Result<IpNet, String> {
    let entry = entry.trim();
    entry
        .parse::<IpNet>()
        .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{entry:?} is neither an IP address nor a CIDR network"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(entries: &[&str]) -> TrustedProxies {
        TrustedProxies(
            entries
                .iter()
                .map(|e| parse_proxy(e).expect("parses"))
                .collect(),
        )
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(FORWARDED_FOR, v.parse().expect("header value"));
        }
        headers
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn the_header_is_ignored_from_an_untrusted_peer() {
        let headers = forwarded(&["203.0.113.9"]);
        let none = TrustedProxies::default();
        assert_eq!(none.client(ip("10.0.0.1"), &headers), ip("10.0.0.1"));
        let other = proxies(&["10.0.0.2"]);
        assert_eq!(other.client(ip("10.0.0.1"), &headers), ip("10.0.0.1"));
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let trusted = proxies(&["10.0.0.0/8", "fd00::1"]);
        // The client wrote a fake hop; the edge proxy appended the real one.
        let headers = forwarded(&["198.51.100.7, 203.0.113.9", "10.1.2.3"]);
        assert_eq!(trusted.client(ip("10.0.0.1"), &headers), ip("203.0.113.9"));
        // Only proxies: the leftmost hop.
        let headers = forwarded(&["10.9.9.9, 10.1.2.3"]);
        assert_eq!(trusted.client(ip("fd00::1"), &headers), ip("10.9.9.9"));
        // No header: the proxy itself.
        assert_eq!(
            trusted.client(ip("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        // Garbage stops the walk at the last trusted hop.
        let headers = forwarded(&["203.0.113.9, bogus, 10.1.2.3"]);
        assert_eq!(trusted.client(ip("10.0.0.1"), &headers), ip("10.1.2.3"));
        let headers = forwarded(&["[2001:db8::5]:4711", "203.0.113.9:80"]);
        assert_eq!(trusted.client(ip("10.0.0.1"), &headers), ip("203.0.113.9"));
    }

    #[test]
    fn entries_are_addresses_or_networks() {
        assert_eq!(
            parse_proxy(" 10.0.0.1 ").map(|n| n.to_string()),
            Ok("10.0.0.1/32".into())
        );
        assert!(parse_proxy("10.0.0.0/8").is_ok());
        assert!(parse_proxy("fd00::/8").is_ok());
        assert!(parse_proxy("proxy.example").is_err());
        assert!(parse_proxy("10.0.0.0/33").is_err());
    }
}
