//! The shell on the store's clock (`store::clock`): the machine's timers, its jittered
//! windows and its ticks, each as a step of the shell; caught up by a clock task that sleeps
//! until a timer may be due and before every message is stepped.

use super::{Inner, Machine, Shell, Timer};
use crate::config::Resolved;
use crate::protocol;
use crate::protocol::Outbox;
use crate::store::clock::{Clock, Clocked};
use crate::store::coordinator::machine::StoreData;
use rand::Rng;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The shell as the clock drives it. Every method takes the machine's lock for itself, so a
/// message may be stepped between two of them: each re-reads what is due.
struct OnClock<'a>(&'a Arc<Shell>);

impl Clocked for OnClock<'_> {
    type Timer = Timer<u64>;

    fn due(&self, out: &mut Vec<Timer<u64>>) {
        let inner = self.0.lock();
        if !inner.crashed {
            inner.machine.due(&inner.cfg, out);
        }
        drop(inner);
        self.0.order_due(out);
    }

    fn fire(&mut self, timer: Timer<u64>) -> Result<(), String> {
        self.0.fire_if_due(timer);
        Ok(()) // a step that cannot be saved stops the machine itself (`step_now_with`)
    }

    fn quiet_ticks(&self) -> Option<u32> {
        let inner = self.0.lock();
        if inner.crashed {
            return None;
        }
        inner.machine.quiet_ticks(&inner.cfg).map(u32::from)
    }

    fn tick(&mut self) -> bool {
        let mut ticked = false;
        let alive = self.0.step(|m, cfg, _| {
            // A message stepped since the due timers fired may have made one due.
            let mut due: Vec<Timer<u64>> = Vec::new();
            m.due(cfg, &mut due);
            if due.is_empty() {
                m.tick(cfg);
                ticked = true;
            }
        });
        ticked || !alive // a crashed machine has no time
    }

    /// A timer whose window is open (a jittered copy retry) fires at a moment drawn
    /// uniformly from what is left of its window: with chance 1/(ticks left + 1) each tick.
    fn draw_windows(&mut self) -> Result<(), String> {
        let mut ready: Vec<(Timer<u64>, protocol::coordinator::TimerTicks)> = Vec::new();
        self.0.step(|m, _, _| m.ready(&mut ready));
        for (timer, left) in ready {
            let fires = self
                .0
                .windows_rng
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .random_ratio(1, u32::from(left) + 1);
            if fires {
                self.0.step(|m, cfg, io| {
                    let mut still: Vec<(Timer<u64>, protocol::coordinator::TimerTicks)> = Vec::new();
                    m.ready(&mut still);
                    if still.iter().any(|(t, _)| *t == timer) {
                        m.on_timer(cfg, timer, io);
                    }
                });
            }
        }
        Ok(())
    }

    /// In one step, so no message can set a sooner timer between the bound and the ticks.
    fn pass_quiet(&mut self, most: u64) -> u64 {
        let mut passed = most; // a crashed machine has no time
        self.0.step(|m, cfg, _| {
            let quiet = m.quiet_ticks(cfg).map_or(most, |q| u64::from(q).saturating_sub(1).min(most));
            for _ in 0..quiet {
                m.tick(cfg);
            }
            passed = quiet;
        });
        passed
    }
}

/// Reorders the timers due at one moment (`Shell::order_due_timers`).
pub type DueOrder = Box<dyn Fn(&mut Vec<Timer<u64>>) + Send + Sync>;

impl Shell {
    /// Fire the timers due at one moment in the order `order` leaves them (a simulated run
    /// replaying a trace fires them in the trace's order; the model allows every order of
    /// timers due in one tick).
    pub fn order_due_timers(&self, order: DueOrder) {
        *self.due_order.lock().unwrap_or_else(|p| p.into_inner()) = Some(order);
    }

    /// The timers due now, in the order they fire.
    fn order_due(&self, due: &mut Vec<Timer<u64>>) {
        if let Some(order) = self.due_order.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            order(due);
        }
    }

    /// Start the clock: tick 0 is now. A task wakes when the next timer may be due (or after
    /// `IDLE_WAKE_MAX_MS` with none set, or when a step set a sooner one) and catches up.
    pub fn start_clock(self: &Arc<Self>) {
        let shell = Arc::downgrade(self);
        let wake = Arc::clone(&self.clock_wake);
        tokio::spawn(async move {
            loop {
                let Some(shell) = shell.upgrade() else { return };
                shell.counters.clock_wakes.fetch_add(1, Ordering::Relaxed);
                let at = {
                    let mut clock = shell.clock.lock().unwrap_or_else(|p| p.into_inner());
                    let fast = shell.fault == Some(super::ShellFault::FastClock);
                    let clock =
                        clock.get_or_insert_with(|| if fast { Clock::running_fast(2) } else { Clock::new() });
                    shell.catch_up_on(clock);
                    // Kept under the machine's lock, so a step that sets a sooner timer sees it.
                    let mut inner = shell.lock();
                    let quiet = if inner.crashed { None } else { inner.machine.quiet_ticks(&inner.cfg) };
                    inner.clock_wake_tick = clock.wake_tick(quiet.map(u32::from));
                    clock.at(inner.clock_wake_tick)
                };
                drop(shell);
                // Biased: polled in order, so a simulated run (`store sim`) is the same every time.
                tokio::select! {
                    biased;
                    _ = tokio::time::sleep_until(at) => {}
                    _ = wake.notified() => {}
                }
            }
        });
    }

    /// Catch the clock up, if it has started; the ticks done since it did.
    fn catch_up(self: &Arc<Self>) -> u64 {
        let mut clock = self.clock.lock().unwrap_or_else(|p| p.into_inner());
        match clock.as_mut() {
            Some(clock) => {
                self.catch_up_on(clock);
                clock.ticks_done()
            }
            None => 0, // no time passes before the clock starts
        }
    }

    fn catch_up_on(self: &Arc<Self>, clock: &mut Clock) {
        // Infallible here: the shell's steps stop the machine themselves when they cannot save.
        let _ = clock.catch_up(&mut OnClock(self));
    }

    /// Fire `timer` if it is still due: each timer is its own step, as in the model, where
    /// firing one may retire another (a deadline ends the request whose fan-out was due too).
    fn fire_if_due(self: &Arc<Self>, timer: Timer<u64>) {
        self.step(|m, cfg, io| {
            let mut due: Vec<Timer<u64>> = Vec::new();
            m.due(cfg, &mut due);
            if due.contains(&timer) {
                m.on_timer(cfg, timer, io);
            }
        });
    }

    /// One step of the machine at the time it is now (the clock's own steps are `step`).
    pub(super) fn step_msg(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Machine, &Resolved, &mut Outbox<StoreData>),
    ) {
        self.step_msg_with(|inner, cfg, io| f(&mut inner.machine, cfg, io));
    }

    /// `step_msg` with the shell's state: the ticks since the last are caught up first, and a
    /// timer the step set sooner than the clock sleeps wakes it.
    pub(super) fn step_msg_with(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Inner, &Resolved, &mut Outbox<StoreData>),
    ) {
        let done = self.catch_up();
        let mut sooner = false;
        self.step_now_with(|inner, cfg, io| {
            f(inner, cfg, io);
            let due_tick = inner.machine.quiet_ticks(cfg).map_or(u64::MAX, |q| done + u64::from(q));
            sooner = due_tick < inner.clock_wake_tick;
            inner.clock_wake_tick = inner.clock_wake_tick.min(due_tick);
        });
        if sooner {
            self.clock_wake.notify_one();
        }
    }
}
