//! Waiting for a coordinator's INFO to say something.

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
