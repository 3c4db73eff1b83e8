//! `--set KEY=VALUE`: one key of a policy, or how long a fault of the model's menu lasts, set
//! on the command line. `explore` and `check` take it, and the commands a sweep prints for a
//! point use it, so a point reopens as a readable command rather than a generated file.
//!
//! A policy key is any key of a policy file (`dead_after=2s`); it goes on top of the policy the
//! command runs. A fault's window is `faults.crash[NODE].duration`, `faults.partition[ZONE].duration`
//! (or the zone's position in the menu) or `faults.degrade[I].duration`, with a duration or a
//! range `LO..HI`: the fault then ends by itself within that window, exactly as a `duration` in
//! the model file says.

use super::duration::{format_ms, LatencyRange};
use super::{
    did_you_mean, FaultSpec, LatencyTicks, PolicyPatch, Scenario, SourcedPolicy, FAULT_DURATION_TICKS_MAX,
};

/// Which fault of the menu a window applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultSlot {
    /// Index into `FaultSpec::crash`.
    Crash(usize),
    /// Index into `FaultSpec::partition`.
    Partition(usize),
    /// Index into `FaultSpec::degrade`.
    Degrade(usize),
}

impl FaultSlot {
    /// The fault's window as the scenario gives it (`None`: it does not end by itself).
    pub fn window(self, faults: &FaultSpec) -> Option<LatencyTicks> {
        match self {
            FaultSlot::Crash(i) => faults.crash_duration[i],
            FaultSlot::Partition(i) => faults.partition_duration[i],
            FaultSlot::Degrade(i) => faults.degrade[i].duration,
        }
    }

    fn window_mut(self, faults: &mut FaultSpec) -> &mut Option<LatencyTicks> {
        match self {
            FaultSlot::Crash(i) => &mut faults.crash_duration[i],
            FaultSlot::Partition(i) => &mut faults.partition_duration[i],
            FaultSlot::Degrade(i) => &mut faults.degrade[i].duration,
        }
    }
}

/// One `--set`: a policy key or a fault's window.
#[derive(Clone, Debug)]
pub enum Setting {
    Policy { key: String, value: toml::Value },
    FaultWindow { key: String, slot: FaultSlot, window: LatencyTicks },
}

impl Setting {
    /// Parse `KEY=VALUE` against `scenario` (its menu, names and tick).
    pub fn parse(spec: &str, scenario: &Scenario) -> Result<Setting, String> {
        let (key, value) = spec
            .split_once('=')
            .ok_or_else(|| format!("--set \"{spec}\": expected KEY=VALUE, e.g. dead_after=2s"))?;
        let (key, value) = (key.trim(), value.trim());
        if key.starts_with("faults.") {
            let slot = fault_slot(key, scenario)?;
            let window = fault_window(key, value, scenario.tick_ms)?;
            return Ok(Setting::FaultWindow { key: key.to_string(), slot, window });
        }
        check_policy_key(key).map_err(|why| format!("--set {key}={value}: {why}"))?;
        let value = toml_value(value);
        policy_patch(key, &value).map_err(|why| format!("--set {key}={value}: {why}"))?;
        Ok(Setting::Policy { key: key.to_string(), value })
    }

    /// `KEY=VALUE` as a command line takes it back.
    pub fn arg(&self, tick_ms: u64) -> String {
        match self {
            Setting::Policy { key, value } => match value {
                toml::Value::String(s) => format!("{key}={s}"),
                v => format!("{key}={v}"),
            },
            Setting::FaultWindow { key, window, .. } => format!("{key}={}", window_text(*window, tick_ms)),
        }
    }
}

/// Apply `settings` in order: fault windows to the scenario, policy keys over `policy`.
pub fn apply(settings: &[Setting], scenario: &mut Scenario, policy: &SourcedPolicy) -> SourcedPolicy {
    let mut policy = policy.clone();
    for s in settings {
        match s {
            Setting::Policy { key, value } => {
                let patch = policy_patch(key, value).expect("checked when parsed");
                policy = policy.then(&SourcedPolicy::new(patch, &format!("--set {key}")));
            }
            Setting::FaultWindow { slot, window, .. } => set_window(scenario, *slot, *window),
        }
    }
    policy
}

/// Make the fault at `slot` end within `window` ticks of its start.
pub fn set_window(scenario: &mut Scenario, slot: FaultSlot, window: LatencyTicks) {
    assert!(window.lo <= window.hi && window.hi <= FAULT_DURATION_TICKS_MAX, "a checked window");
    *slot.window_mut(&mut scenario.faults) = Some(window);
}

/// A window as a `duration` value: `"1s"` or `"500ms..2s"`.
pub fn window_text(window: LatencyTicks, tick_ms: u64) -> String {
    let (lo, hi) = (format_ms(u64::from(window.lo) * tick_ms), format_ms(u64::from(window.hi) * tick_ms));
    if window.lo == window.hi {
        hi
    } else {
        format!("{lo}..{hi}")
    }
}

/// `faults.KIND[WHICH].duration` → the fault of the menu it names.
pub fn fault_slot(key: &str, scenario: &Scenario) -> Result<FaultSlot, String> {
    let usage = "a fault's window is faults.crash[NODE].duration, faults.partition[ZONE].duration or faults.degrade[I].duration";
    let rest = key.strip_prefix("faults.").expect("a fault key");
    let (kind, rest) = rest.split_once('[').ok_or_else(|| format!("--set {key}: {usage}"))?;
    let (which, rest) = rest.split_once(']').ok_or_else(|| format!("--set {key}: {usage}"))?;
    if rest != ".duration" {
        return Err(format!("--set {key}: {usage}"));
    }
    let faults = &scenario.faults;
    let menu = |what: &str, names: Vec<String>| {
        if names.is_empty() {
            format!("--set {key}: the model's fault menu has no {what}")
        } else {
            format!(
                "--set {key}: \"{which}\" is not on the model's fault menu ({what}: {})",
                names.join(", ")
            )
        }
    };
    match kind {
        "crash" => {
            let names: Vec<String> =
                faults.crash.iter().map(|&n| scenario.nodes[usize::from(n)].name.clone()).collect();
            let by_name = names.iter().position(|n| n == which);
            let by_index =
                which.parse::<usize>().ok().filter(|&i| i < names.len() && !faults.crash_coordinator);
            by_name.or(by_index).map(FaultSlot::Crash).ok_or_else(|| menu("crashes", names))
        }
        "partition" => {
            let names: Vec<String> =
                faults.partition.iter().map(|&z| scenario.zones[usize::from(z)].clone()).collect();
            let by_name = names.iter().position(|n| n == which);
            let by_index = which.parse::<usize>().ok().filter(|&i| i < names.len());
            by_name.or(by_index).map(FaultSlot::Partition).ok_or_else(|| menu("cuts", names))
        }
        "degrade" => {
            let names: Vec<String> = (0..faults.degrade.len()).map(|i| i.to_string()).collect();
            which
                .parse::<usize>()
                .ok()
                .filter(|&i| i < names.len())
                .map(FaultSlot::Degrade)
                .ok_or_else(|| menu("degraded links (by position)", names))
        }
        _ => Err(format!("--set {key}: {usage}")),
    }
}

/// A window value as ticks: whole ticks, at most the longest fault the state can count.
pub fn fault_window(key: &str, value: &str, tick_ms: u64) -> Result<LatencyTicks, String> {
    let fail = |why: String| format!("--set {key}={value}: {why}");
    let range = LatencyRange::parse(value.trim_matches('"')).map_err(fail)?;
    let lo = range.lo.ticks(tick_ms).map_err(fail)?;
    let hi = range.hi.ticks(tick_ms).map_err(fail)?;
    if hi > FAULT_DURATION_TICKS_MAX {
        return Err(fail(format!("{hi} ticks; a fault lasts at most {FAULT_DURATION_TICKS_MAX} ticks")));
    }
    Ok(LatencyTicks { lo, hi })
}

/// A policy key, or an error with the nearest known one.
pub fn check_policy_key(key: &str) -> Result<(), String> {
    // An empty patch lists every key in serde's "expected one of" when given an unknown one.
    let mut table = toml::Table::new();
    table.insert(key.to_string(), toml::Value::Boolean(false));
    match toml::Value::Table(table).try_into::<PolicyPatch>() {
        Err(e) if e.to_string().contains("unknown field") => {
            let hint = did_you_mean(&e.to_string())
                .map(|h| format!("; {}", h.trim_start_matches("help: ")))
                .unwrap_or_default();
            Err(format!("unknown policy key `{key}`{hint}"))
        }
        _ => Ok(()),
    }
}

/// `key = value` as a policy patch, or serde's reason in the user's words.
pub fn policy_patch(key: &str, value: &toml::Value) -> Result<PolicyPatch, String> {
    let mut table = toml::Table::new();
    table.insert(key.to_string(), value.clone());
    toml::Value::Table(table).try_into::<PolicyPatch>().map_err(|e| {
        let message = super::plain_words(e.message().trim());
        message.strip_prefix(&format!("{key}: ")).unwrap_or(&message).to_string()
    })
}

/// A command-line value as TOML: a number, a boolean or a quoted string as written, and
/// anything else (`300ms`, `unlimited`) as a string.
pub fn toml_value(text: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {text}")) {
        Ok(mut t) => t.remove("v").expect("the key parsed"),
        Err(_) => toml::Value::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--set` and `--vary` values out of a key's range are told in words, as a file's are
    /// (they said "expected u8").
    #[test]
    fn a_value_out_of_range_is_told_in_words() {
        let why = policy_patch("write_quorum", &toml::Value::Integer(300)).unwrap_err();
        assert!(why.contains("expected an integer from 0 to 255") && !why.contains("u8"), "{why}");
        let why = policy_patch("coordinator_load_ceiling", &toml::Value::Integer(99_999)).unwrap_err();
        assert!(why.contains("expected an integer from 0 to 65535"), "{why}");
    }

    fn scenario() -> Scenario {
        Scenario::load(std::path::Path::new("models/remirror-storm.toml")).expect("a library model")
    }

    #[test]
    fn a_fault_window_names_its_fault_and_is_checked_against_the_tick() {
        let s = scenario();
        let set = Setting::parse("faults.partition[b].duration=500ms..1200ms", &s).unwrap();
        let Setting::FaultWindow { slot, window, .. } = &set else { panic!("a window") };
        assert_eq!((*slot, window.lo, window.hi), (FaultSlot::Partition(0), 5, 12));
        assert_eq!(set.arg(s.tick_ms), "faults.partition[b].duration=500ms..1200ms");
        let by_index = Setting::parse("faults.partition[0].duration=1s", &s).unwrap();
        assert!(matches!(by_index, Setting::FaultWindow { slot: FaultSlot::Partition(0), .. }));
        let err = Setting::parse("faults.partition[a].duration=1s", &s).unwrap_err();
        assert!(err.contains("\"a\" is not on the model's fault menu (cuts: b)"), "{err}");
        let err = Setting::parse("faults.partition[b].duration=150ms", &s).unwrap_err();
        assert!(err.contains("not a whole number of ticks"), "{err}");
        let err = Setting::parse("faults.partition[b].duration=30s", &s).unwrap_err();
        assert!(err.contains("250 ticks"), "{err}");
        let err = Setting::parse("faults.partition[b].latency=1s", &s).unwrap_err();
        assert!(err.contains("faults.partition[ZONE].duration"), "{err}");
    }

    #[test]
    fn a_policy_key_is_checked_and_applied_over_the_policy() {
        let mut s = scenario();
        let err = Setting::parse("dead_afterr=2s", &s).unwrap_err();
        assert!(err.contains("unknown policy key `dead_afterr`"), "{err}");
        let err = Setting::parse("write_quorum=two", &s).unwrap_err();
        assert!(err.starts_with("--set write_quorum=\"two\""), "{err}");
        let sets = [
            Setting::parse("down_out_interval=3s", &s).unwrap(),
            Setting::parse("faults.crash[n2].duration=4s", &s).unwrap(),
        ];
        let base = s.base_policy.clone();
        let policy = apply(&sets, &mut s, &base);
        assert!(policy.patch.describe().contains(&("down_out_interval", "\"3s\"".to_string())));
        assert_eq!(s.faults.crash_duration[0], Some(LatencyTicks { lo: 40, hi: 40 }));
    }
}
