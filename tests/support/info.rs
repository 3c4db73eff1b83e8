//! Reading a coordinator's INFO, and waiting for it to say something.

#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Poll `info` until `predicate` holds; panics with the last INFO after `limit`.
pub fn wait_for_info(
    limit: Duration,
    what: &str,
    info: impl Fn() -> String,
    predicate: impl Fn(&str) -> bool,
) -> String {
    let start = Instant::now();
    loop {
        let info = info();
        if predicate(&info) {
            return info;
        }
        assert!(start.elapsed() < limit, "no {what} within {limit:?}:\n{info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The value of INFO's `field:` line, through `c`; panics with INFO if there is none.
pub fn info_line(c: &mut replicheck::store::coordinator::resp::Client, field: &str) -> String {
    let info = c.info().unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO has no {field}: {info}"))
        .trim()
        .to_string()
}
