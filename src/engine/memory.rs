//! The memory bound: exploration stops, incomplete, before it takes the machine. Resident
//! memory is read from `/proc/self/statm` after each BFS level, and the run stops when the
//! next level is expected not to fit: the last level's growth, scaled by how much the
//! frontier grew, added to what is resident now. (A level's memory is mostly its frontier and
//! the seen set's new entries, both proportional to the number of new states.)

/// A size as users write it: `"16G"`, `"512M"`, `"2.5GiB"`, or bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| {
        format!("\"{text}\" is not a size (write e.g. \"16G\", \"512M\" or a number of bytes)")
    })?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("\"{text}\": unknown unit \"{other}\" (use K, M, G or T)")),
    };
    let bytes = number * scale;
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("\"{text}\": must be at least one byte"));
    }
    Ok(bytes as u64)
}

/// Resident memory of this process, in bytes (Linux; `None` elsewhere).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// The machine's memory, in bytes (`MemTotal`; `None` where unknown).
pub fn machine_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The default bound: 80% of the machine's memory, leaving room for the system and the
/// report; `None` (no bound) where the machine's memory is unknown.
pub fn default_limit_bytes() -> Option<u64> {
    machine_bytes().map(|m| m / 10 * 8)
}

/// Tracks resident memory level by level.
#[derive(Clone, Debug)]
pub struct Guard {
    pub limit_bytes: u64,
    last_resident: u64,
    last_frontier: u64,
}

impl Guard {
    pub fn new(limit_bytes: u64) -> Guard {
        release_freed_memory();
        Guard { limit_bytes, last_resident: resident_bytes().unwrap_or(0), last_frontier: 1 }
    }

    /// After a level: whether the next level (with `frontier` states to expand) is expected
    /// to fit. Returns the resident bytes now when it is not.
    pub fn next_level_fits(&mut self, frontier: u64) -> Result<(), u64> {
        let Some(now) = resident_bytes() else { return Ok(()) };
        let growth = now.saturating_sub(self.last_resident) as f64;
        let scale = frontier as f64 / self.last_frontier.max(1) as f64;
        let expected = now as f64 + growth * scale.max(1.0);
        self.last_resident = now;
        self.last_frontier = frontier.max(1);
        if now >= self.limit_bytes || expected > self.limit_bytes as f64 {
            Err(now)
        } else {
            Ok(())
        }
    }
}

/// Hand the pages freed by earlier runs in this process back to the system. The allocator
/// keeps them for reuse, and they would count as resident against the next run's bound: a
/// small model after a large one in `prove --verify` stopped at its first level.
pub fn release_freed_memory() {
    // SAFETY: mi_collect has no preconditions; it only frees memory nothing refers to.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// Bytes as a person reads them: "1.2 GiB", "350 MiB".
pub fn describe(bytes: u64) -> String {
    let gib = bytes as f64 / (1024.0 * 1024.0 * 1024.0);
    if gib >= 1.0 {
        format!("{gib:.1} GiB")
    } else {
        format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes_with_units() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("16G"), Ok(16 << 30));
        assert_eq!(parse_size("2.5GiB"), Ok(5 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("12Q").unwrap_err().contains("unknown unit"));
        assert!(parse_size("0").is_err());
    }

    #[test]
    fn reads_this_process_and_the_machine() {
        let resident = resident_bytes().expect("Linux has /proc/self/statm");
        let machine = machine_bytes().expect("Linux has /proc/meminfo");
        assert!(resident > 0 && resident < machine);
        assert!(default_limit_bytes().unwrap() < machine);
    }

    #[test]
    fn a_guard_stops_before_the_limit() {
        let now = resident_bytes().unwrap();
        assert!(Guard::new(now / 2).next_level_fits(10).is_err(), "already over");
        assert!(Guard::new(now * 100).next_level_fits(10).is_ok());
    }
}
