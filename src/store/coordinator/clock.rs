//! The shell's clock: protocol ticks of 1 ms from `start_clock`, slept through while no timer
//! can come due (`Coordinator::quiet_ticks`) and caught up before every message is stepped.

use super::{Inner, Machine, Shell, Timer};
use crate::config::Resolved;
use crate::protocol;
use crate::protocol::Outbox;
use crate::store::coordinator::machine::StoreData;
use crate::store::IDLE_WAKE_MAX_MS;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Shell {
    /// Start the clock: tick 0 is now. A task wakes when the next timer may be due (or after
    /// `IDLE_WAKE_MAX_MS` with none set, or when a step set a sooner one) and catches up.
    pub fn start_clock(self: &Arc<Self>) {
        let origin = *self.clock_origin.get_or_init(Instant::now);
        let shell = Arc::downgrade(self);
        let wake = Arc::clone(&self.clock_wake);
        tokio::spawn(async move {
            loop {
                let Some(shell) = shell.upgrade() else { return };
                shell.counters.clock_wakes.fetch_add(1, Ordering::Relaxed);
                let done = shell.catch_up();
                let wake_tick = {
                    let mut inner = shell.lock();
                    let quiet = if inner.crashed { None } else { inner.machine.quiet_ticks(&inner.cfg) };
                    let quiet = quiet.map_or(IDLE_WAKE_MAX_MS, u64::from).clamp(1, IDLE_WAKE_MAX_MS);
                    inner.clock_wake_tick = done + quiet;
                    done + quiet
                };
                drop(shell);
                tokio::select! {
                    _ = tokio::time::sleep_until(origin + Duration::from_millis(wake_tick)) => {}
                    _ = wake.notified() => {}
                }
            }
        });
    }

    /// Every tick from the last one done up to now, each after every timer due before it
    /// fired; ticks in which no timer can come due pass in one step. The ticks done after.
    pub(super) fn catch_up(self: &Arc<Self>) -> u64 {
        let Some(origin) = self.clock_origin.get() else { return 0 };
        let now = origin.elapsed().as_millis() as u64;
        let done = self.ticks_done.load(Ordering::Acquire);
        if done >= now {
            return done;
        }
        let _one_at_a_time = self.catching_up.lock().unwrap_or_else(|p| p.into_inner());
        let mut done = self.ticks_done.load(Ordering::Acquire);
        while done < now {
            let left = now - done;
            let mut quiet_passed = 0;
            let alive = self.step_now_with(|inner, cfg, _| {
                let quiet = inner.machine.quiet_ticks(cfg).map_or(u64::MAX, u64::from);
                quiet_passed = quiet.saturating_sub(1).min(left);
                for _ in 0..quiet_passed {
                    inner.machine.tick(cfg);
                }
            });
            if !alive {
                done = now; // a crashed machine has no time
            } else if quiet_passed > 0 {
                done += quiet_passed;
            } else if self.tick() {
                done += 1;
            }
            self.ticks_done.store(done, Ordering::Release);
        }
        done
    }

    /// One millisecond's tick: due timers fire, open windows draw, then time passes, unless
    /// a timer came due meanwhile (then it fired instead, and this returns false).
    fn tick(self: &Arc<Self>) -> bool {
        let mut timers = Vec::new();
        self.step(|m, cfg, _| {
            // Timers due now fire before time passes (a step may have made one due).
            m.due(cfg, &mut timers);
        });
        for timer in timers.drain(..) {
            self.fire_if_due(timer);
        }
        // A timer whose window is open (a jittered copy retry) fires at a moment drawn
        // uniformly from what is left of its window: with chance 1/(ticks left + 1) each tick.
        let mut ready: Vec<(Timer<u64>, protocol::coordinator::TimerTicks)> = Vec::new();
        self.step(|m, _, _| m.ready(&mut ready));
        for (timer, left) in ready {
            if rand::random_ratio(1, u32::from(left) + 1) {
                self.step(|m, cfg, io| {
                    let mut still: Vec<(Timer<u64>, protocol::coordinator::TimerTicks)> = Vec::new();
                    m.ready(&mut still);
                    if still.iter().any(|(t, _)| *t == timer) {
                        m.on_timer(cfg, timer, io);
                    }
                });
            }
        }
        let mut ticked = false;
        self.step(|m, cfg, _| {
            let mut due: Vec<Timer<u64>> = Vec::new();
            m.due(cfg, &mut due);
            if due.is_empty() {
                m.tick(cfg);
                ticked = true;
            } else {
                timers = due;
            }
        });
        for timer in timers {
            self.fire_if_due(timer);
        }
        ticked || self.lock().crashed
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
