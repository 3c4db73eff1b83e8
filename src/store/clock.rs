//! The store's clock for a protocol machine: 1 ms protocol ticks counted from the machine's
//! start, not woken every millisecond but when the next timer may be due (the machine's
//! `quiet_ticks`) or a message arrives, and caught up then, every due timer fired before time
//! passes, as a clock ticking every millisecond would have done them. Every machine the store
//! runs is on it: the quorum coordinator, the leader family's replicas and manager.

use std::time::Duration;
use tokio::time::Instant;

/// A machine with no timer set looks at the time at least this often (ms).
pub const IDLE_WAKE_MAX_MS: u64 = 1_000;

/// A machine the store drives by the clock.
pub trait Clocked {
    type Timer: Copy;
    /// The timers due now.
    fn due(&self, out: &mut Vec<Self::Timer>);
    /// Fire `timer` as a step of its own (saved before what it sends leaves).
    fn fire(&mut self, timer: Self::Timer) -> Result<(), String>;
    /// A lower bound on the ticks before a timer is due were no message to arrive (`None`:
    /// no timer set).
    fn quiet_ticks(&self) -> Option<u32>;
    /// One tick passes, unless a timer is due (then false: it fires first).
    fn tick(&mut self) -> bool;
    /// Timers whose window is open fire at a moment drawn from what is left of it.
    fn draw_windows(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Up to `most` ticks in which no timer can come due pass at once; how many did.
    fn pass_quiet(&mut self, most: u64) -> u64 {
        let quiet = self.quiet_ticks().map_or(most, |q| u64::from(q).saturating_sub(1).min(most));
        for _ in 0..quiet {
            let ticked = self.tick();
            debug_assert!(ticked, "a timer came due within the quiet ticks");
        }
        quiet
    }
}

pub struct Clock {
    start: Instant,
    ticks_done: u64,
    /// Ticks per millisecond: 1, except in a deliberately broken shell (`running_fast`).
    speed: u64,
    /// The clock reads the time in steps of this many ms: 1, except in a replay of the
    /// model's trace (`ModelTicks`).
    grain_ms: u64,
}

thread_local! {
    /// The model's tick and its tick 0, while a replay runs on this thread (`ModelTicks`).
    static MODEL_TICKS: std::cell::Cell<Option<(u64, Instant)>> = const { std::cell::Cell::new(None) };
}

/// While it lives, every clock made on this thread reads the time in the model's ticks of
/// `tick_ms`, counted from `epoch` (the model's tick 0). `store sim --replay` runs its
/// machines so (its runtime is this thread's): in the model every step of a tick happens at the
/// tick's start, and a machine that saw them a millisecond apart would measure a silence or a
/// lag that the trace measures as exactly its timeout as a few ms short of it.
pub struct ModelTicks {
    previous: Option<(u64, Instant)>,
}

impl ModelTicks {
    pub fn set(tick_ms: u64, epoch: Instant) -> ModelTicks {
        assert!(tick_ms >= 1);
        ModelTicks { previous: MODEL_TICKS.with(|t| t.replace(Some((tick_ms, epoch)))) }
    }
}

impl Drop for ModelTicks {
    fn drop(&mut self) {
        MODEL_TICKS.with(|t| t.set(self.previous));
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

impl Clock {
    /// Tick 0 is now.
    pub fn new() -> Clock {
        match MODEL_TICKS.with(|t| t.get()) {
            // Started at the model's tick its start falls in (a machine restarted within a
            // tick restarts, in the model, at that tick).
            Some((tick_ms, epoch)) => {
                let since_ms = Instant::now().saturating_duration_since(epoch).as_millis() as u64;
                let start = epoch + Duration::from_millis(since_ms / tick_ms * tick_ms);
                Clock { start, ticks_done: 0, speed: 1, grain_ms: tick_ms }
            }
            None => Clock { start: Instant::now(), ticks_done: 0, speed: 1, grain_ms: 1 },
        }
    }

    /// A clock that counts `speed` ticks per millisecond: a shell bug for the tests that
    /// `store sim` and trace validation catch one.
    pub fn running_fast(speed: u64) -> Clock {
        assert!(speed >= 1);
        Clock { speed, ..Clock::new() }
    }

    pub fn ticks_done(&self) -> u64 {
        self.ticks_done
    }

    /// The tick to look at the time again: the first a timer may be due at, or
    /// `IDLE_WAKE_MAX_MS` on when none is set.
    pub fn wake_tick(&self, quiet_ticks: Option<u32>) -> u64 {
        self.ticks_done + quiet_ticks.map_or(IDLE_WAKE_MAX_MS, u64::from).clamp(1, IDLE_WAKE_MAX_MS)
    }

    /// When the clock reads tick `tick`.
    pub fn at(&self, tick: u64) -> Instant {
        let ms = tick.div_ceil(self.speed);
        self.start + Duration::from_millis(ms.div_ceil(self.grain_ms) * self.grain_ms)
    }

    /// `at(wake_tick(quiet_ticks))`.
    pub fn wake(&self, quiet_ticks: Option<u32>) -> Instant {
        self.at(self.wake_tick(quiet_ticks))
    }

    /// Every tick up to now, each after every timer due before it fired; ticks in which no
    /// timer can come due pass at once.
    pub fn catch_up<M: Clocked>(&mut self, machine: &mut M) -> Result<(), String> {
        let elapsed_ms = self.start.elapsed().as_millis() as u64;
        let now = elapsed_ms / self.grain_ms * self.grain_ms * self.speed;
        let mut due = Vec::new();
        while self.ticks_done < now {
            fire_due(machine, &mut due)?;
            let passed = machine.pass_quiet(now - self.ticks_done);
            if passed > 0 {
                self.ticks_done += passed;
                continue;
            }
            machine.draw_windows()?;
            fire_due(machine, &mut due)?;
            if machine.tick() {
                self.ticks_done += 1;
            }
        }
        if self.grain_ms > 1 {
            // The next reading is a grain away: what is due now fires now (at the model's
            // tick's start, before its other steps), not at the next millisecond.
            fire_due(machine, &mut due)?;
        }
        Ok(())
    }
}

/// Fire every due timer, and those their firing made due, until none is.
fn fire_due<M: Clocked>(machine: &mut M, due: &mut Vec<M::Timer>) -> Result<(), String> {
    loop {
        due.clear();
        machine.due(due);
        if due.is_empty() {
            return Ok(());
        }
        for &timer in due.iter() {
            machine.fire(timer)?;
        }
    }
}
