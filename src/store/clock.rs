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
    /// Fire `timer` as a step of its own (saved and sent).
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
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

impl Clock {
    /// Tick 0 is now.
    pub fn new() -> Clock {
        Clock { start: Instant::now(), ticks_done: 0, speed: 1 }
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

    /// When tick `tick` begins.
    pub fn at(&self, tick: u64) -> Instant {
        self.start + Duration::from_millis(tick.div_ceil(self.speed))
    }

    /// `at(wake_tick(quiet_ticks))`.
    pub fn wake(&self, quiet_ticks: Option<u32>) -> Instant {
        self.at(self.wake_tick(quiet_ticks))
    }

    /// Every tick up to now, each after every timer due before it fired; ticks in which no
    /// timer can come due pass at once.
    pub fn catch_up<M: Clocked>(&mut self, machine: &mut M) -> Result<(), String> {
        let now = self.start.elapsed().as_millis() as u64 * self.speed;
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
