//! A sweep's knobs: `--vary KEY=RANGE` parsed against the model into the values a sweep gives
//! a policy key or a fault's window.

use super::sweep::KNOB_VALUES_MAX;
use crate::config::duration::{format_ms, Rate};
use crate::config::setting::{self, check_policy_key, policy_patch as patch, toml_value, FaultSlot};
use crate::config::{Dur, LatencyTicks, Scenario};
use crate::policy::Ticks;
use serde::Serialize;

/// One value of a knob: as TOML (what the policy patch is parsed from) and as shown.
#[derive(Clone, Debug, Serialize)]
pub struct KnobValue {
    /// The value as shown and as written on the command line (`1400ms`, `2`).
    pub label: String,
    /// The value as TOML (`"1400ms"`, `2`).
    #[serde(skip)]
    pub toml: toml::Value,
}

/// A knob and the values the sweep gives it, in order.
#[derive(Clone, Debug, Serialize)]
pub struct Knob {
    pub key: String,
    /// The `--vary` argument as given.
    pub spec: String,
    pub values: Vec<KnobValue>,
    /// Set when the knob is a fault's window (`faults.partition[b].duration`), not a policy key.
    #[serde(skip)]
    pub fault: Option<FaultKnob>,
}

/// A knob over how long a fault of the menu may last. Each value is the longest it lasts; the
/// shortest is the same at every point (the model's shortest, or the knob's smallest value if
/// that is shorter or the model lets the fault last for ever), so each point allows every
/// behaviour of the points below it and the verdicts are monotone: the boundary is "the
/// longest such fault the policy survives".
#[derive(Clone, Copy, Debug)]
pub struct FaultKnob {
    pub slot: FaultSlot,
    pub shortest_ticks: Ticks,
}

impl FaultKnob {
    /// The fault's window at value `v` (a duration the knob checked when it was parsed).
    pub fn window(&self, v: &KnobValue, tick_ms: u64) -> LatencyTicks {
        let text = v.toml.as_str().expect("a fault knob's values are durations");
        let hi = Dur::parse(text).expect("checked").ticks(tick_ms).expect("checked");
        LatencyTicks { lo: self.shortest_ticks.min(hi), hi }
    }
}

/// Parse one `--vary KEY=RANGE` against the scenario (its tick) into a knob.
pub fn parse_knob(spec: &str, scenario: &Scenario) -> Result<Knob, String> {
    let (key, range) = spec.split_once('=').ok_or_else(|| {
        format!("--vary \"{spec}\": expected KEY=RANGE, e.g. replica_ack_timeout=300ms..3s")
    })?;
    let key = key.trim();
    let range = range.trim();
    let fail = |why: String| format!("--vary {key}={range}: {why}");
    let fault = if key.starts_with("faults.") {
        Some(setting::fault_slot(key, scenario).map_err(|m| m.replacen("--set ", "--vary ", 1))?)
    } else {
        check_policy_key(key).map_err(fail)?;
        None
    };
    let values = if let Some((lo, hi)) = range.split_once("..") {
        range_values(key, lo.trim(), hi.trim(), scenario.tick_ms).map_err(fail)?
    } else {
        let mut values = Vec::new();
        for item in range.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(fail("an empty value in the list".into()));
            }
            values.push(KnobValue { label: unquote(item), toml: toml_value(item) });
        }
        values
    };
    if values.len() > KNOB_VALUES_MAX {
        return Err(fail(format!("{} values, more than the limit of {KNOB_VALUES_MAX}", values.len())));
    }
    let Some(slot) = fault else {
        // Every value must be a valid value of the key on its own (its type, its unit).
        for v in &values {
            patch(key, &v.toml).map_err(|why| fail(format!("key `{key}` = {}: {why}", v.toml)))?;
        }
        return Ok(Knob { key: key.to_string(), spec: spec.to_string(), values, fault: None });
    };
    // A fault's window: every value one duration, the longest the fault may last.
    let mut longest = Vec::with_capacity(values.len());
    for v in &values {
        let text = v.toml.as_str().map(str::to_string).unwrap_or_else(|| v.toml.to_string());
        let window = setting::fault_window(key, &text, scenario.tick_ms)
            .map_err(|m| m.replacen("--set ", "--vary ", 1))?;
        if window.lo != window.hi {
            return Err(fail(format!(
                "\"{text}\" is a window; each value of a fault's knob is the longest the fault lasts (its shortest stays the model's)"
            )));
        }
        longest.push(window.hi);
    }
    // Every point's window starts at one shortest duration, so the windows nest.
    let smallest = *longest.iter().min().expect("a knob has values");
    let shortest_ticks = slot.window(&scenario.faults).map_or(smallest, |w| w.lo.min(smallest));
    let values = values
        .into_iter()
        .map(|v| KnobValue { toml: toml::Value::String(v.label.clone()), label: v.label })
        .collect();
    Ok(Knob {
        key: key.to_string(),
        spec: spec.to_string(),
        values,
        fault: Some(FaultKnob { slot, shortest_ticks }),
    })
}

fn unquote(text: &str) -> String {
    text.trim_matches('"').to_string()
}

/// `lo..hi`: integers step by 1, durations by the model's tick.
fn range_values(key: &str, lo: &str, hi: &str, tick_ms: u64) -> Result<Vec<KnobValue>, String> {
    if let (Ok(a), Ok(b)) = (lo.parse::<i64>(), hi.parse::<i64>()) {
        if a > b {
            return Err(format!("the range starts above its end ({a} > {b})"));
        }
        if (b - a) as u64 >= KNOB_VALUES_MAX as u64 {
            return Err(format!("{} values, more than the limit of {KNOB_VALUES_MAX}", b - a + 1));
        }
        return Ok((a..=b)
            .map(|n| KnobValue { label: n.to_string(), toml: toml::Value::Integer(n) })
            .collect());
    }
    if let (Ok(a), Ok(b)) = (Rate::parse(lo), Rate::parse(hi)) {
        return rate_values(key, &a, &b, tick_ms);
    }
    let (a, b) = match (Dur::parse(lo), Dur::parse(hi)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(why), _) | (_, Err(why)) => {
            return Err(format!(
                "a range lo..hi is of integers, durations or rates ({why}); list other values: {key}=a,b,c"
            ))
        }
    };
    for d in [&a, &b] {
        if !d.ms.is_multiple_of(tick_ms) {
            return Err(format!(
                "key `{key}` = \"{}\": \"{}\" is not a whole number of ticks (tick = {}); a duration range steps by the tick",
                d.text,
                d.text,
                format_ms(tick_ms)
            ));
        }
    }
    if a.ms > b.ms {
        return Err(format!("the range starts above its end ({} > {})", a.text, b.text));
    }
    let count = (b.ms - a.ms) / tick_ms + 1;
    if count > KNOB_VALUES_MAX as u64 {
        return Err(format!(
            "{count} values at the model's tick of {}, more than the limit of {KNOB_VALUES_MAX}",
            format_ms(tick_ms)
        ));
    }
    Ok((0..count)
        .map(|i| {
            let label = format_ms(a.ms + i * tick_ms);
            KnobValue { toml: toml::Value::String(label.clone()), label }
        })
        .collect())
}

/// `lo..hi` of rates: every whole number of writes per tick from `lo` to `hi`, written in
/// `lo`'s unit when that is whole (`10/s..40/s` at a 100ms tick: 10/s, 20/s, 30/s, 40/s).
fn rate_values(key: &str, lo: &Rate, hi: &Rate, tick_ms: u64) -> Result<Vec<KnobValue>, String> {
    let per_tick =
        |r: &Rate| r.per_tick(tick_ms).map_err(|why| format!("key `{key}` = \"{}\": {why}", r.text));
    let (a, b) = (per_tick(lo)?, per_tick(hi)?);
    if a > b {
        return Err(format!("the range starts above its end ({} > {})", lo.text, hi.text));
    }
    let label = |n: u16| match lo.per_ms {
        Some(per_ms) if per_ms.is_multiple_of(tick_ms) => {
            let unit = if per_ms == 1000 { "s" } else { "min" };
            format!("{}/{unit}", u64::from(n) * per_ms / tick_ms)
        }
        _ => format!("{n}/tick"),
    };
    Ok((a..=b)
        .map(|n| {
            let text = label(n);
            KnobValue { toml: toml::Value::String(text.clone()), label: text }
        })
        .collect())
}
