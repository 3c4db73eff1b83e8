//! Durations as users write them ("500ms", "2s", "5m") and latency ranges ("300ms..700ms").

use serde::{Deserialize, Deserializer};
use std::fmt;

/// A duration from a config file, in whole milliseconds, with the text it was written as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dur {
    pub ms: u64,
    pub text: String,
}

impl Dur {
    pub fn parse(text: &str) -> Result<Dur, String> {
        let trimmed = text.trim();
        if trimmed.starts_with('-') {
            return Err(format!("invalid duration \"{text}\": durations cannot be negative"));
        }
        if !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(format!(
                "invalid duration \"{text}\": a duration needs a unit, e.g. \"{trimmed}ms\" or \"{trimmed}s\""
            ));
        }
        let parsed = humantime::parse_duration(trimmed).map_err(|e| {
            format!("invalid duration \"{text}\": {e} (write e.g. \"500ms\", \"2s\", \"5m\")")
        })?;
        if parsed.subsec_nanos() % 1_000_000 != 0 {
            return Err(format!("invalid duration \"{text}\": finer than a millisecond"));
        }
        let ms = u64::try_from(parsed.as_millis())
            .map_err(|_| format!("invalid duration \"{text}\": too long"))?;
        Ok(Dur { ms, text: text.to_string() })
    }

    /// This duration as a whole number of ticks of `tick_ms`, or an error naming the value.
    pub fn ticks(&self, tick_ms: u64) -> Result<u32, String> {
        self.ticks_at_most(tick_ms, u64::from(crate::policy::TICKS_MAX))
    }

    /// As `ticks`, with `max` ticks instead of the model's limit (for rules that only compare
    /// durations, where the size of a state space does not matter).
    pub fn ticks_at_most(&self, tick_ms: u64, max: u64) -> Result<u32, String> {
        assert!(tick_ms > 0);
        assert!(max <= u64::from(u32::MAX));
        if !self.ms.is_multiple_of(tick_ms) {
            return Err(format!(
                "\"{}\" is not a whole number of ticks (tick = {})",
                self.text,
                format_ms(tick_ms)
            ));
        }
        let ticks = self.ms / tick_ms;
        if ticks > max {
            return Err(format!(
                "\"{}\" is {ticks} ticks, more than the limit of {max} ticks (tick = {}); use a coarser tick",
                self.text,
                format_ms(tick_ms)
            ));
        }
        Ok(ticks as u32)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string with a unit, e.g. \"500ms\" or \"2s\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Dur, E> {
                Dur::parse(s).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "invalid duration {n}: a duration is a string with a unit, e.g. \"{n}ms\""
                )))
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Dur, E> {
                self.visit_i64(n as i64)
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "invalid duration {n}: a duration is a string with a unit, e.g. \"{n}s\""
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// A range of durations: "100ms" (fixed) or "300ms..700ms" (a one-way latency, how long a
/// fault lasts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyRange {
    pub lo: Dur,
    pub hi: Dur,
}

impl LatencyRange {
    pub fn parse(text: &str) -> Result<LatencyRange, String> {
        let (lo, hi) = match text.split_once("..") {
            Some((lo, hi)) => (Dur::parse(lo)?, Dur::parse(hi)?),
            None => {
                let d = Dur::parse(text)?;
                (d.clone(), d)
            }
        };
        if lo.ms > hi.ms {
            return Err(format!("invalid range \"{text}\": the lower bound exceeds the upper"));
        }
        Ok(LatencyRange { lo, hi })
    }

    /// The range as written: `"2s"` or `"1s..3s"`.
    pub fn text(&self) -> String {
        if self.lo.text == self.hi.text {
            self.lo.text.clone()
        } else {
            format!("{}..{}", self.lo.text, self.hi.text)
        }
    }
}

impl<'de> Deserialize<'de> for LatencyRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        LatencyRange::parse(&text).map_err(serde::de::Error::custom)
    }
}

pub fn format_ms(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// A rate of writes as users write it: "20/s" (per second) or "2/tick" (per model tick).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rate {
    pub count: u32,
    /// `None`: per tick.
    pub per_ms: Option<u64>,
    pub text: String,
}

impl Rate {
    pub fn parse(text: &str) -> Result<Rate, String> {
        let bad = |why: &str| format!("invalid rate \"{text}\": {why} (write e.g. \"20/s\" or \"2/tick\")");
        let (count, unit) = text.trim().split_once('/').ok_or_else(|| bad("no unit"))?;
        let count: u32 = count.trim().parse().map_err(|_| bad("the count is not a whole number"))?;
        let per_ms = match unit.trim() {
            "tick" => None,
            "s" => Some(1000),
            "min" => Some(60_000),
            _ => return Err(bad("the unit is not `s`, `min` or `tick`")),
        };
        Ok(Rate { count, per_ms, text: text.to_string() })
    }

    /// Writes per tick of `tick_ms`, or an error naming the value when that is not whole.
    pub fn per_tick(&self, tick_ms: u64) -> Result<u16, String> {
        assert!(tick_ms > 0);
        let per_tick = match self.per_ms {
            None => u64::from(self.count),
            Some(per_ms) => {
                let scaled = u64::from(self.count) * tick_ms;
                if !scaled.is_multiple_of(per_ms) {
                    return Err(format!(
                        "\"{}\" is not a whole number of writes per tick (tick = {})",
                        self.text,
                        format_ms(tick_ms)
                    ));
                }
                scaled / per_ms
            }
        };
        u16::try_from(per_tick).ok().filter(|&n| n <= RATE_PER_TICK_MAX).ok_or_else(|| {
            format!("\"{}\" is {per_tick} writes per tick: at most {RATE_PER_TICK_MAX}", self.text)
        })
    }

    /// Writes per second, for rules that compare rates without a tick.
    pub fn per_s(&self) -> f64 {
        match self.per_ms {
            None => f64::from(self.count),
            Some(per_ms) => f64::from(self.count) * 1000.0 / per_ms as f64,
        }
    }
}

/// Model loads are counted per tick in a `u8`.
pub const RATE_PER_TICK_MAX: u16 = 64;

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Rate::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `max_attempts`: a whole number, or "unlimited" (retry until success).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxAttempts {
    Limit(u8),
    Unlimited,
}

impl<'de> Deserialize<'de> for MaxAttempts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = MaxAttempts;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number of attempts, or \"unlimited\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MaxAttempts, E> {
                match s {
                    "unlimited" => Ok(MaxAttempts::Unlimited),
                    _ => Err(E::custom(format!(
                        "invalid max_attempts \"{s}\": a whole number of attempts, or \"unlimited\""
                    ))),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<MaxAttempts, E> {
                u8::try_from(n).map(MaxAttempts::Limit).map_err(|_| {
                    E::custom(format!(
                        "invalid max_attempts {n}: a whole number of attempts, or \"unlimited\""
                    ))
                })
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<MaxAttempts, E> {
                self.visit_i64(i64::try_from(n).unwrap_or(-1))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_bare_numbers() {
        assert_eq!(Dur::parse("500ms").unwrap().ms, 500);
        assert_eq!(Dur::parse("2s").unwrap().ms, 2000);
        assert_eq!(Dur::parse("5m").unwrap().ms, 300_000);
        assert!(Dur::parse("5").unwrap_err().contains("needs a unit"));
        assert!(Dur::parse("-5s").unwrap_err().contains("negative"));
        assert!(Dur::parse("fast").is_err());
    }

    #[test]
    fn ticks_must_divide() {
        let d = Dur::parse("550ms").unwrap();
        assert!(d.ticks(100).unwrap_err().contains("not a whole number of ticks"));
        assert_eq!(Dur::parse("2s").unwrap().ticks(100), Ok(20));
    }

    #[test]
    fn latency_ranges() {
        let r = LatencyRange::parse("300ms..700ms").unwrap();
        assert_eq!((r.lo.ms, r.hi.ms), (300, 700));
        assert!(LatencyRange::parse("700ms..300ms").is_err());
    }

    #[test]
    fn rates_convert_to_whole_writes_per_tick() {
        assert_eq!(Rate::parse("20/s").unwrap().per_tick(100), Ok(2));
        assert_eq!(Rate::parse("3/tick").unwrap().per_tick(100), Ok(3));
        assert!(Rate::parse("15/s").unwrap().per_tick(100).unwrap_err().contains("whole number"));
        assert!(Rate::parse("20").is_err());
        assert!(Rate::parse("x/s").is_err());
        assert!(Rate::parse("20/h").is_err());
        assert!(Rate::parse("1000/tick").unwrap().per_tick(100).is_err());
    }
}
