//! What the exploring commands (`check`, `diff`, `prove`, `sweep`) show on a terminal while
//! they run, and how `check` and `diff` stop on Ctrl-C or SIGTERM.
//!
//! The engine reports progress through a plain `fn` pointer after each BFS level
//! ([`crate::engine::Limits::progress`]), so the bar it updates lives here, in one static.

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Set by the first SIGINT or SIGTERM; the engine polls it after each level
/// ([`crate::engine::Limits::stop`]).
pub static STOP: AtomicBool = AtomicBool::new(false);

static SIGNALS: AtomicUsize = AtomicUsize::new(0);

/// Exit status after a second interrupt: 128 + SIGINT, as a shell reports a killed command.
pub const EXIT_FORCED: i32 = 130;

/// Catch SIGINT and SIGTERM: the first sets [`STOP`] (exploration ends after the level in
/// hand and the partial report is printed), a second exits at once with [`EXIT_FORCED`].
pub fn stop_on_interrupt() -> Result<(), String> {
    stop_on_interrupt_saying(
        "replicheck: interrupted: stopping after the current level to report what was found \
         (interrupt again to quit at once)",
    )
}

/// As [`stop_on_interrupt`], printing `message` at the first signal.
pub fn stop_on_interrupt_saying(message: &'static str) -> Result<(), String> {
    ctrlc::set_handler(move || {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            STOP.store(true, Ordering::SeqCst);
            clear();
            eprintln!("{message}");
        } else {
            std::process::exit(EXIT_FORCED);
        }
    })
    .map_err(|e| format!("cannot install the interrupt handler: {e}"))
}

/// Whether the run was interrupted.
pub fn interrupted() -> bool {
    STOP.load(Ordering::SeqCst)
}

static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Show a progress line on stderr for the run named `label` (e.g. `[2/9] basic-quorum /
/// write-quorum-1`), replacing any earlier one: a spinner, the label, then states, states/s,
/// depth and queue after each level, and the elapsed time (ticking between levels). With
/// `expected_states` (the count a certificate in proofs/ records), also the share of them seen
/// and an estimate of the time left.
pub fn start(label: String, expected_states: Option<u64>) {
    let (bar, template) = match expected_states {
        Some(n) => (
            ProgressBar::new(n),
            "{spinner} {prefix} {msg} [{elapsed_precise}] {percent}% of the {len} states proofs/ records, ~{eta} left",
        ),
        None => (ProgressBar::new_spinner(), "{spinner} {prefix} {msg} [{elapsed_precise}]"),
    };
    bar.set_style(ProgressStyle::with_template(template).expect("a valid template"));
    bar.set_prefix(label);
    bar.set_message("starting");
    bar.enable_steady_tick(Duration::from_millis(250));
    if let Some(old) = BAR.lock().unwrap_or_else(|e| e.into_inner()).replace(bar) {
        old.finish_and_clear();
    }
}

/// The engine's progress callback: the shown line's numbers (nothing if none is shown).
pub fn update(p: &crate::engine::Progress) {
    if let Some(bar) = BAR.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        let secs = p.elapsed.as_secs_f64();
        let rate = if secs > 0.0 { p.unique_states as f64 / secs } else { 0.0 };
        bar.set_message(format!(
            "{} states, {rate:.0} states/s, depth {}, queue {}",
            p.unique_states, p.depth, p.frontier
        ));
        if bar.length().is_some() {
            bar.set_position(p.unique_states);
        }
    }
}

/// Remove the progress line, if one is shown.
pub fn clear() {
    if let Some(bar) = BAR.lock().unwrap_or_else(|e| e.into_inner()).take() {
        bar.finish_and_clear();
    }
}

/// Print a line on stderr above the progress line (which stays).
pub fn line(text: &str) {
    match BAR.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        Some(bar) => bar.suspend(|| eprintln!("{text}")),
        None => eprintln!("{text}"),
    }
}
