//! Value parsers for the flags the exploring commands share (`check`, `diff`, `prove`,
//! `sweep`, `bench`): clap runs them, so a bad value is refused naming the flag and the value,
//! with exit 2, before anything runs.

/// The most worker threads `--threads` accepts.
pub const THREADS_MAX: u64 = 1024;

/// `--threads`: 1 to [`THREADS_MAX`].
pub fn threads_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=THREADS_MAX)
}

/// `--max-states`: a count of states, at least 1.
pub fn parse_max_states(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count of states: {e}")),
    }
}

/// `--addr`: HOST:PORT, the host a name, an IPv4 address or a bracketed IPv6 address, the port
/// 1 to 65535. Nothing is resolved or bound (the address only goes into links).
pub fn parse_addr(s: &str) -> Result<String, String> {
    let usage = "expected HOST:PORT, e.g. 127.0.0.1:3000";
    let (host, port) = s.rsplit_once(':').ok_or_else(|| format!("no port: {usage}"))?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err(format!("\"{port}\" is not a port (1 to 65535): {usage}")),
    }
    let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        inner.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
    };
    if host_ok {
        Ok(s.to_string())
    } else {
        Err(format!("\"{host}\" is not a host name or IP address: {usage}"))
    }
}
